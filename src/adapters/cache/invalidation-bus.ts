// The invalidation bus (interface in core/ports/invalidation.ts): Redis pub/sub when Redis is configured,
// else in process. Delivery is best effort; a loss that can be noticed (reconnect, failed publish) drops
// every cache, and the caches' TTLs bound staleness when a message is lost unnoticed.
import { withDeadline } from '../../core/support/deadline.js';
import { EventEmitter } from 'node:events';
import { watchResets, type RedisClient } from './redis.js';
import type { Invalidation, InvalidationBus } from '../../core/ports/invalidation.js';

/** How long a write's answer waits on its invalidation's publish (see send). */
const PUBLISH_BOUND_MS = 1000;

export class LocalBus implements InvalidationBus {
  private readonly emitter = new EventEmitter();

  async publish(message: Invalidation): Promise<void> {
    this.emitter.emit('message', message);
  }

  subscribe(handler: (message: Invalidation) => void): void {
    this.emitter.on('message', handler);
  }

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
  }
}

/**
 * Redis pub/sub, on any topology: a Sentinel client resubscribes on the new master after a failover, a
 * Cluster client subscribes through one node and moves when it fails (PUBLISH reaches every node of a
 * Cluster). Whenever messages may have been lost (a reconnect, a Cluster node lost), every subscriber here
 * drops everything it cached; a publish that failed is owed, and made good as an "all" once Redis answers.
 */
export interface RedisBusOptions {
  publisher: RedisClient;
  /** A connection of its own: a subscribed Redis connection can run no other command. */
  subscriber: RedisClient;
  channel: string;
  /** Told of a publish that failed (it is owed, and made good as an "all"), and of a heartbeat PING that failed. */
  onFailure?: (operation: 'publish' | 'bus_ping') => void;
  /**
   * A PING on the subscriber this often: a subscribed connection sends nothing by itself, so without it a
   * half-open subscriber would stay 'ready' and deaf for good. The PING arms the client's socketTimeout,
   * which drops a silent connection; the reconnect then subscribes again and drops every cache. 0: none.
   */
  heartbeatMs?: number;
}

export class RedisBus implements InvalidationBus {
  private readonly handlers: ((message: Invalidation) => void)[] = [];
  private readonly local = new EventEmitter();
  /** A publish failed: the other instances may have missed a change; tell them to drop everything. */
  private owed = false;

  private readonly publisher: RedisClient;
  private readonly channel: string;
  private readonly onFailure: (operation: 'publish' | 'bus_ping') => void;
  private readonly heartbeat: NodeJS.Timeout | undefined;

  constructor({ publisher, subscriber, channel, onFailure = () => {}, heartbeatMs = 0 }: RedisBusOptions) {
    this.publisher = publisher;
    this.channel = channel;
    this.onFailure = onFailure;
    subscriber.on('message', (channel: string, payload: string) => {
      if (channel !== this.channel) return;
      let message: Invalidation;
      try {
        message = JSON.parse(payload) as Invalidation;
      } catch {
        // Only this service publishes on the channel; a payload it cannot parse (another version's, a
        // hand-typed PUBLISH) is treated as "anything may have changed".
        message = { kind: 'all' };
      }
      this.deliver(message);
    });
    // A SUBSCRIBE that fails on a connection that stays up would leave this instance deaf to every other
    // instance's invalidations: treat it as a lost connection (drop everything, reconnect with the client's
    // backoff, subscribe again on the next 'ready').
    const subscribeNow = () =>
      void subscriber.subscribe(this.channel).catch(() => {
        this.deliver({ kind: 'all' });
        if (subscriber.status === 'ready') subscriber.disconnect(true);
      });
    subscriber.on('ready', subscribeNow);
    if (subscriber.status === 'ready') subscribeNow();
    watchResets(subscriber, () => this.deliver({ kind: 'all' }));
    publisher.on('ready', () => void this.settleOwed());
    this.local.on('message', (m: Invalidation) => this.handlers.forEach((h) => h(m)));
    if (heartbeatMs > 0) {
      this.heartbeat = setInterval(() => {
        if (subscriber.status === 'ready') void subscriber.ping().catch(() => this.onFailure('bus_ping'));
      }, heartbeatMs);
      this.heartbeat.unref();
    }
  }

  private deliver(message: Invalidation): void {
    this.local.emit('message', message);
  }

  private async settleOwed(): Promise<void> {
    if (!this.owed) return;
    this.owed = false;
    await this.send({ kind: 'all' });
  }

  /** true when Redis took the message. */
  private async send(message: Invalidation): Promise<boolean> {
    const sent = this.publisher.publish(this.channel, JSON.stringify(message)).then(
      () => true,
      () => false,
    );
    // A publish that hangs (a black-holed Cluster node queues it for seconds) is owed like one that failed: the
    // change is durable already, and the next publish that gets through tells everyone to drop everything.
    const delivered = await withDeadline(sent, PUBLISH_BOUND_MS);
    if (!delivered) {
      this.owed = true;
      this.onFailure('publish');
    }
    return delivered;
  }

  async publish(message: Invalidation): Promise<void> {
    // Always apply locally first, so this instance is coherent even when Redis is away.
    this.deliver(message);
    // An older publish owed and Redis takes messages again: make it good now (not after one that just failed).
    if ((await this.send(message)) && this.owed && this.publisher.status === 'ready') await this.settleOwed();
  }

  subscribe(handler: (message: Invalidation) => void): void {
    this.handlers.push(handler);
  }

  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    this.handlers.length = 0;
  }
}
