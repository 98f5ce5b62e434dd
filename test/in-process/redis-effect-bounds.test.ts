// A write's answer does not wait on Redis past a bound once its commit is durable: a black-holed Cluster node
// keeps its commands queued for seconds (test/e2e/fault-matrix-redis-topologies.test.ts saw an admin write
// hang past 6 s). A publish that hangs is owed as one that failed (an "all" once Redis answers); a delete that
// hangs distrusts Redis as one that failed (src/adapters/cache/cached-store.ts, invalidation-bus.ts).
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { RedisBus } from '../../src/adapters/cache/invalidation-bus.js';
import { EFFECT_BOUND_MS, withinBound } from '../../src/adapters/cache/cached-store.js';
import type { RedisClient } from '../../src/adapters/cache/redis.js';

/** A connection that is 'ready' and whose PUBLISH answers as `publish` says. */
function fakeRedis(publish: (channel: string, payload: string) => Promise<number>) {
  const client = Object.assign(new EventEmitter(), {
    status: 'ready',
    published: [] as string[],
    subscribe: async () => 1,
    ping: async () => 'PONG',
    disconnect: () => undefined,
    publish: (channel: string, payload: string) => {
      client.published.push(payload);
      return publish(channel, payload);
    },
  });
  return client;
}

describe('Redis effects of a write are bounded', () => {
  it('a publish that hangs returns within the bound, counts as failed, and is made good as "all" on the next ready', async () => {
    let hang = true;
    const publisher = fakeRedis(() => (hang ? new Promise<number>(() => {}) : Promise.resolve(1)));
    const failures: string[] = [];
    const bus = new RedisBus({ publisher: publisher as unknown as RedisClient, subscriber: fakeRedis(async () => 1) as unknown as RedisClient, channel: 'c', onFailure: (op) => failures.push(op) });
    const delivered: unknown[] = [];
    bus.subscribe((m) => delivered.push(m));
    const started = performance.now();
    await bus.publish({ kind: 'agent', apiKeyId: 'k' });
    const took = performance.now() - started;
    expect(took).toBeGreaterThanOrEqual(900); // it did wait for the answer, up to the bound
    expect(delivered).toEqual([{ kind: 'agent', apiKeyId: 'k' }]); // applied here at once
    expect(failures).toEqual(['publish']);
    hang = false;
    publisher.emit('ready');
    await new Promise((resolve) => setImmediate(resolve));
    expect(publisher.published.at(-1)).toBe(JSON.stringify({ kind: 'all' }));
    await bus.close();
  });

  it('withinBound says whether the work settled in time, and never rejects', async () => {
    expect(await withinBound(Promise.resolve(), 50)).toBe(true);
    expect(await withinBound(Promise.reject(new Error('refused')), 50)).toBe(true);
    expect(await withinBound(new Promise(() => {}), 20)).toBe(false);
    expect(EFFECT_BOUND_MS).toBeLessThan(6000); // the fault matrix's bound on any answer
  });
});
