// The fault matrix on the Redis path of the two replicated topologies: Sentinel (primary + replica + three
// sentinels, REDIS_SENTINELS) and Cluster (six nodes, REDIS_CLUSTER_NODES). The nodes announce the port of
// a fault proxy in front of each (replica-announce-port, which the sentinels also monitor the primary at;
// cluster-announce-port), so the addresses the service learns from the sentinels or from CLUSTER SLOTS lead
// through the proxies and their faults are not bypassed (kit/topology, `faultProxies`). Every proxy of the
// topology is switched at once to refuse, reset, blackhole, slow and truncate, each once, under the
// matrix's request loops (test/support/fault-matrix.ts). The sentinels' down-after and the cluster bus (not
// proxied) keep these short faults from starting a failover: this is the service's own Redis path failing.
// The promises are those of the matrix, and recovery includes Redis in use again (ace_store_up). That the
// service saw Redis down during each fault (but slow) shows its path did go through the proxies.
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { FaultMode, FaultProxy } from '../../kit/fault-proxy.js';
import { FAULT_MODES } from '../../kit/fault-proxy.js';
import { startRedisCluster, startRedisSentinelGroup, stopAll } from '../../kit/topology/index.js';
import { startService } from '../support/service.js';
import { Rig, serviceEnv, type Answer } from '../support/fault-matrix.js';

/** The fault showed once the service saw Redis down (slow: once a dozen answers went through it). */
const redisBitten = (rig: Rig, mode: FaultMode) => (mode === 'slow' ? (answers: Answer[]) => answers.length >= 12 : async () => (await rig.storeUp('redis')) === 0);

const sweepAll = (rig: Rig, proxies: () => FaultProxy[]) => async (mode: FaultMode) => {
  await rig.sweep(
    mode,
    async () => {
      await Promise.all(proxies().map((p) => p.set(mode)));
    },
    async () => {
      await Promise.all(proxies().map((p) => p.heal()));
    },
    redisBitten(rig, mode),
    async () => (await rig.storeUp('redis')) === 1,
  );
  await rig.noServerErrors();
};

/** A topology behind fault proxies: the proxies, and the service settings that reach it. */
interface FaultedTopology {
  proxies: FaultProxy[];
  env: Record<string, string>;
}

const topologies: { name: string; start: () => Promise<FaultedTopology> }[] = [
  {
    name: 'Redis Sentinel (faults on the path to the data nodes)',
    start: async () => {
      // down-after far beyond a fault window: the sentinels (which reach the primary through its proxy too)
      // must not fail it over; what is tested is the service's path.
      const group = await startRedisSentinelGroup({ faultProxies: true, downAfterMs: 60_000 });
      return {
        proxies: group.proxies,
        env: {
          REDIS_SENTINELS: group.sentinelAddresses().map((a) => `${a.host}:${a.port}`).join(','),
          REDIS_SENTINEL_MASTER: group.masterName,
        },
      };
    },
  },
  {
    name: 'Redis Cluster (faults on the path to every node)',
    start: async () => {
      const cluster = await startRedisCluster({ faultProxies: true });
      return { proxies: cluster.proxies, env: { REDIS_CLUSTER_NODES: cluster.startupNodes().map((n) => `${n.host}:${n.port}`).join(',') } };
    },
  },
];

describe.each(topologies)('fault matrix: $name', ({ start }) => {
  let rig: Rig;
  let proxies: FaultProxy[] = [];

  beforeAll(async () => {
    const topology = await start();
    proxies = topology.proxies;
    rig = new Rig(await startService({ mode: 'real', env: { ...serviceEnv, REDIS_URL: '', ...topology.env } }));
    await rig.seed();
  }, 120_000);

  afterAll(async () => {
    await rig?.service.dispose();
    await stopAll();
  });

  it.each(FAULT_MODES)('fault %s: up, no 500, no reset client, Redis in use again within 15 s', async (mode) => {
    await sweepAll(rig, () => proxies)(mode);
  });
});
