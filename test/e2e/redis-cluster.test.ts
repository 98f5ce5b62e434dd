// Redis Cluster (REDIS_CLUSTER_NODES) on a real six-node cluster (kit/topology): every slot is
// used (cache, limits, pub/sub), a master killed and its replica promoted keeps two instances answering,
// a deactivation during the failover is refused at the other instance within 1 s of it, limits stay
// shared; a cluster node given as REDIS_URL refuses start-up, naming the setting.
// The harness (life cycle, scenario, shared checks) is test/support/redis-failover.ts.
import { describe, expect, it } from 'vitest';
import { startRedisCluster } from '../../kit/topology/index.js';
import { expectFailoverOutcome, expectStartRefused, expectTopologyAndSharedLimits, readyz, runFailover, failoverSuite } from '../support/redis-failover.js';

describe('Redis Cluster', () => {
  const suite = failoverSuite(async () => {
    const cluster = await startRedisCluster();
    return { topology: cluster, env: { REDIS_CLUSTER_NODES: cluster.startupNodes().map((n) => `${n.host}:${n.port}`).join(',') } };
  });

  it('reports the three masters and shares rate limits of agents on every slot', async () => {
    // One agent's budget here, another's after the failover (test below): keys on different slots.
    const masters = (await suite.topology.masters()).map((m) => `127.0.0.1:${m.port}`).sort();
    await expectTopologyAndSharedLimits(suite.pair, { topology: 'cluster', primaries: masters }, { labels: { topology: 'cluster' }, value: 3 });
  }, 90_000);

  it('keeps answering through a master failover, refuses a deactivated agent at the other instance within 1 s of it, loses nothing', async () => {
    const { pair, topology: cluster } = suite;
    let replica: { port: number } | undefined;
    const outcome = await runFailover(
      pair,
      async () => {
        ({ replica } = await cluster.killMaster());
      },
      async () => {
        await cluster.waitForPromotion(cluster.node(replica!.port));
      },
    );
    // Also: limits shared on the new masters.
    await expectFailoverOutcome(pair, outcome, 'cluster');
    await expect.poll(async () => (await readyz(pair.b)).checks.redis_topology.primaries, { timeout: 15_000 }).toContain(`127.0.0.1:${replica!.port}`);
  }, 120_000);

  it('refuses to start with a cluster node as REDIS_URL, naming the setting to use', async () => {
    // A node still running: the test above killed a master (a dead one would make the service wait for
    // it instead of refusing).
    const node = suite.topology.startupNodes().find((n) => suite.topology.node(n.port).running)!;
    await expectStartRefused(suite.pair, { REDIS_CLUSTER_NODES: '', REDIS_URL: `redis://${node.host}:${node.port}` }, ['REDIS_CLUSTER_NODES']);
  });
});
