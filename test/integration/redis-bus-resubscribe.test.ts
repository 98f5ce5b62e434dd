// The invalidation bus against a real Redis, behind the kit's fault proxy swallowing SUBSCRIBE commands while a fault
// lasts: the subscription that follows a reconnect times out. That must neither end the process (an
// unhandled rejection: ioredis's own resubscription drops its promise) nor leave the instance deaf to the
// other instances' invalidations once Redis answers again (a failed SUBSCRIBE on a connection that stays
// up). Seen in the fault matrix under CPU load: "reset: the service exited (1)", Command timed out.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { RedisBus } from '../../src/adapters/cache/invalidation-bus.js';
import { closeRedis, connectRedis, type RedisClient } from '../../src/adapters/cache/redis.js';
import type { Invalidation } from '../../src/core/ports/invalidation.js';
import { REDIS_URL } from '../support/service.js';
import { waitFor } from '../../kit/wait.js';
import { FaultProxy } from '../../kit/fault-proxy.js';

describe('the invalidation bus when SUBSCRIBE times out after a reconnect', () => {
  const channel = `ace-test-${randomBytes(4).toString('hex')}:invalidate`;
  let proxy: FaultProxy;
  const received: Invalidation[] = [];
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  let outside: Redis;
  let publisher: RedisClient;
  let subscriber: RedisClient;

  beforeAll(async () => {
    process.on('unhandledRejection', onUnhandled);
    const redis = new URL(REDIS_URL);
    proxy = await FaultProxy.start({ target: { host: redis.hostname, port: Number(redis.port || 6379) } });
    const port = proxy.port;
    outside = new Redis(REDIS_URL);
    publisher = connectRedis(REDIS_URL, 500);
    subscriber = connectRedis(`redis://127.0.0.1:${port}`, 500);
    const bus = new RedisBus({ publisher, subscriber, channel });
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

    proxy.swallowClientChunks(/subscribe/i);
    const allBefore = received.filter((m) => m.kind === 'all').length;
    await proxy.set('reset');
    await proxy.heal();
    // The reconnect's SUBSCRIBE times out (500 ms): the bus says everything may have changed.
    await waitFor('a failed SUBSCRIBE to drop every cache', () => received.filter((m) => m.kind === 'all').length > allBefore + 1, 20_000);

    proxy.swallowClientChunks(undefined);
    await heard('after-the-fault');
    expect(unhandled).toEqual([]);
  });
});
