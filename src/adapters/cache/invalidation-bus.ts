// The invalidation bus (interface in ../invalidation.ts): Redis pub/sub when REDIS_URL is set, else in process.
// Delivery is best effort; the caches' TTLs bound staleness when a message is lost.
import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import type { Invalidation, InvalidationBus } from '../../core/ports/invalidation.js';

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

export class RedisBus implements InvalidationBus {
  private readonly handlers: ((message: Invalidation) => void)[] = [];
  private readonly local = new EventEmitter();
  private everReady = false;

  constructor(
    private readonly publisher: Redis,
    private readonly subscriber: Redis,
    private readonly channel: string,
  ) {
    subscriber.on('message', (channel: string, payload: string) => {
      if (channel !== this.channel) return;
      try {
        this.deliver(JSON.parse(payload) as Invalidation);
      } catch {
        // A malformed message is dropped; TTLs still bound staleness.
      }
    });
    subscriber.on('ready', () => {
      void subscriber.subscribe(this.channel).catch(() => {});
      // Messages may have been lost while disconnected: drop everything cached.
      if (this.everReady) this.deliver({ kind: 'all' });
      this.everReady = true;
    });
    this.local.on('message', (m: Invalidation) => this.handlers.forEach((h) => h(m)));
  }

  private deliver(message: Invalidation): void {
    this.local.emit('message', message);
  }

  async publish(message: Invalidation): Promise<void> {
    // Always apply locally first, so this instance is coherent even when Redis is away.
    this.deliver(message);
    await this.publisher.publish(this.channel, JSON.stringify(message)).catch(() => {});
  }

  subscribe(handler: (message: Invalidation) => void): void {
    this.handlers.push(handler);
  }

  async close(): Promise<void> {
    this.handlers.length = 0;
  }
}
