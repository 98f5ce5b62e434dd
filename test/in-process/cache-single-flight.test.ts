// Single-flight refills of the in-process cache (src/adapters/cache/cached-store.ts): reads that miss while
// a read of the same entry is out wait for it (one load, not one per request), but a read that comes after
// an invalidation never joins a load begun before it (a disabled agent is refused at once).
import { describe, expect, it } from 'vitest';
import client from 'prom-client';
import { CachedStore } from '../../src/adapters/cache/cached-store.js';
import { CacheMetrics } from '../../src/adapters/cache/cache-metrics.js';
import { LocalBus } from '../../src/adapters/cache/invalidation-bus.js';
import type { AgentView } from '../../src/core/model.js';
import type { Store } from '../../src/core/ports/store.js';

function view(status: string): AgentView {
  return { agentId: 'agent-1', apiKeyId: 'key-1', status, grants: {} } as unknown as AgentView;
}

function setUp() {
  const loads: ((value: AgentView) => void)[] = [];
  const inner = { getAgentView: () => new Promise<AgentView>((resolve) => loads.push(resolve)) } as unknown as Store;
  const bus = new LocalBus();
  const store = new CachedStore({ inner, redis: undefined, keyPrefix: 't:', redisTtlSeconds: 300, localTtlMs: 60_000, localMaxEntries: 100, bus, metrics: new CacheMetrics({ registry: new client.Registry() }) });
  return { store, bus, loads };
}

describe('cache refills: single flight', () => {
  it('reads of one entry that miss together cause one load, and all get its answer', async () => {
    const { store, loads } = setUp();
    const reads = Array.from({ length: 64 }, () => store.getAgentView('key-1'));
    expect(loads).toHaveLength(1);
    loads[0](view('active'));
    const answers = await Promise.all(reads);
    expect(answers.every((answer) => answer?.status === 'active')).toBe(true);
    // Cached now: no load at all.
    expect((await store.getAgentView('key-1'))?.status).toBe('active');
    expect(loads).toHaveLength(1);
  });

  it('a read after an invalidation does not join the load begun before it', async () => {
    const { store, bus, loads } = setUp();
    const before = store.getAgentView('key-1');
    await bus.publish({ kind: 'agent', apiKeyId: 'key-1' }); // the agent was disabled meanwhile
    const after = store.getAgentView('key-1');
    expect(loads).toHaveLength(2);
    loads[0](view('active')); // read before the change
    loads[1](view('inactive'));
    expect((await before)?.status).toBe('active');
    expect((await after)?.status).toBe('inactive');
    // The stale answer was not cached: the next read sees the change.
    expect((await store.getAgentView('key-1'))?.status).toBe('inactive');
  });
});
