// The invalidation bus against a real Redis, behind a proxy that swallows SUBSCRIBE commands while a fault
// lasts: the subscription that follows a reconnect times out. That must neither end the process (an
// unhandled rejection: ioredis's own resubscription drops its promise) nor leave the instance deaf to the
// other instances' invalidations once Redis answers again (a failed SUBSCRIBE on a connection that stays
// up). Seen in the fault matrix under CPU load: "reset: the service exited (1)", Command timed out.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { RedisBus } from '../src/adapters/cache/invalidation-bus.js';
import { closeRedis, connectRedis, type RedisClient } from '../src/adapters/cache/redis.js';
import type { Invalidation } from '../src/core/ports/invalidation.js';
import { REDIS_URL } from './support/service.js';
import { waitFor } from '../kit/wait.js';

/** Forwards to Redis; while `swallowSubscribe` is on, a client chunk naming SUBSCRIBE never arrives. */
class SubscribeSwallower {
  swallowSubscribe = false;
  private readonly sockets = new Set<net.Socket>();
  private readonly server: net.Server;

  constructor(target: URL) {
    this.server = net.createServer((client) => {
      const upstream = net.connect(Number(target.port || 6379), target.hostname);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('error', () => {});
        socket.on('close', () => {
          this.sockets.delete(socket);
          client.destroy();
          upstream.destroy();
        });
      }
      client.on('data', (chunk: Buffer) => {
        if (this.swallowSubscribe && /subscribe/i.test(chunk.toString('latin1'))) return;
        upstream.write(chunk);
      });
      upstream.pipe(client);
    });
  }

  listen(): Promise<number> {
    return new Promise((resolve) => this.server.listen(0, '127.0.0.1', () => resolve((this.server.address() as net.AddressInfo).port)));
  }

  /** Resets every connection through the proxy (the client reconnects). */
  resetAll(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  close(): Promise<void> {
    this.resetAll();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

describe('the invalidation bus when SUBSCRIBE times out after a reconnect', () => {
  const channel = `ace-test-${randomBytes(4).toString('hex')}:invalidate`;
  const proxy = new SubscribeSwallower(new URL(REDIS_URL));
  const received: Invalidation[] = [];
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  let outside: Redis;
  let publisher: RedisClient;
  let subscriber: RedisClient;

  beforeAll(async () => {
    process.on('unhandledRejection', onUnhandled);
    const port = await proxy.listen();
    outside = new Redis(REDIS_URL);
    publisher = connectRedis(REDIS_URL, 500);
    subscriber = connectRedis(`redis://127.0.0.1:${port}`, 500);
    const bus = new RedisBus(publisher, subscriber, channel);
    bus.subscribe((message) => received.push(message));
  });

  afterAll(async () => {
    process.off('unhandledRejection', onUnhandled);
    closeRedis(publisher);
    closeRedis(subscriber);
    outside.disconnect();
    await proxy.close();
  });

  /** Publishes as another instance would, until this instance's bus hears it. */
  async function heard(agentId: string): Promise<void> {
    const message: Invalidation = { kind: 'agent', apiKeyId: agentId };
    await waitFor(
      `the bus to hear ${agentId}`,
      async () => {
        await outside.publish(channel, JSON.stringify(message));
        return received.some((m) => m.kind === 'agent' && m.apiKeyId === agentId);
      },
      20_000,
      200,
    );
  }

  it('survives the timeout, drops everything, and hears other instances again once SUBSCRIBE goes through', async () => {
    await heard('before-the-fault');

    proxy.swallowSubscribe = true;
    const allBefore = received.filter((m) => m.kind === 'all').length;
    proxy.resetAll();
    // The reconnect's SUBSCRIBE times out (500 ms): the bus says everything may have changed.
    await waitFor('a failed SUBSCRIBE to drop every cache', () => received.filter((m) => m.kind === 'all').length > allBefore + 1, 20_000);

    proxy.swallowSubscribe = false;
    await heard('after-the-fault');
    expect(unhandled).toEqual([]);
  });
});
