// In process: a unit of work whose outcome is unknown (WriteDeadlineError: COMMIT sent, never answered)
// drops every cache at once — Redis, the in-process cache, other instances through the bus (which also
// clears the verified-secret memory) — and again when the driver finally learns the outcome.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { CachedStore } from '../../src/adapters/cache/cached-store.js';
import { LocalBus } from '../../src/adapters/cache/invalidation-bus.js';
import type { Invalidation } from '../../src/core/ports/invalidation.js';
import client from 'prom-client';
import { CacheMetrics } from '../../src/adapters/cache/cache-metrics.js';
import { WriteDeadlineError } from '../../src/core/errors.js';
import type { AgentView } from '../../src/core/model.js';
import type { Store } from '../../src/core/ports/store.js';
import type { UnitOfWork } from '../../src/core/ports/unit-of-work.js';
import { REDIS_URL } from '../support/service.js';
import { waitFor } from '../../kit/wait.js';

describe('write with an unknown outcome', () => {
  let redis: Redis;
  const prefix = `ace-test-${randomBytes(4).toString('hex')}:c:`;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  it('invalidates everything at once, and again once the outcome is known', async () => {
    const view: AgentView = { agentId: 'a1', apiKeyId: 'k1', status: 'active', grants: {} };
    let reads = 0;
    let settle!: () => void;
    const settled = new Promise<void>((resolve) => (settle = resolve));
    const inner = {
      getAgentView: async () => {
        reads++;
        return view;
      },
    } as unknown as Store;
    // A unit of work whose COMMIT went unanswered: it names no record, so which keys it touched is unknown.
    const stalled: UnitOfWork = {
      run: async () => {
        throw new WriteDeadlineError('postgres', settled);
      },
    };
    const bus = new LocalBus();
    const seen: Invalidation[] = [];
    bus.subscribe((message) => seen.push(message));
    const store = new CachedStore({
      inner,
      redis,
      keyPrefix: prefix,
      redisTtlSeconds: 300,
      localTtlMs: 60_000,
      localMaxEntries: 100,
      bus,
      metrics: new CacheMetrics({ registry: new client.Registry() }),
    });

    await store.getAgentView('k1');
    await waitFor('the view in Redis', async () => (await redis.exists(`${prefix}agent:k1`)) === 1);
    await redis.set(`${prefix}platform:p1`, '{}'); // anything else under the cache prefix goes too
    await store.getAgentView('k1');
    expect(reads).toBe(1); // served from the in-process cache

    // The write does not name which agent's key it touched: everything must go.
    await expect(store.unitOfWork(stalled).run((tx) => tx.store.updateAgent('a1', { status: 'inactive' }))).rejects.toBeInstanceOf(WriteDeadlineError);
    expect(await redis.keys(`${prefix}*`)).toEqual([]);
    expect(seen.filter((m) => m.kind === 'all').length).toBeGreaterThanOrEqual(1);
    await store.getAgentView('k1');
    expect(reads).toBe(2); // the in-process entry was dropped

    // Filled again meanwhile (a reader that loaded the old row); the late outcome drops it once more.
    await waitFor('the view back in Redis', async () => (await redis.exists(`${prefix}agent:k1`)) === 1);
    const before = seen.filter((m) => m.kind === 'all').length;
    settle();
    await waitFor('a second invalidation after the outcome', async () => seen.filter((m) => m.kind === 'all').length > before);
    await waitFor('Redis emptied again', async () => (await redis.keys(`${prefix}*`)).length === 0);
  });
});
