// Redis Cluster (REDIS_CLUSTER_NODES) on a real six-node cluster (test/support/topology): every slot is
// used (cache, limits, pub/sub), a master killed and its replica promoted keeps two instances answering,
// a deactivation during the failover is refused at the other instance within 1 s of it, limits stay
// shared; a cluster node given as REDIS_URL refuses start-up, naming the setting.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient } from '../kit/admin.js';
import { runToExit } from './support/service.js';
import { startRedisCluster, stopAll, type RedisCluster } from './support/topology/index.js';
import { expectFailoverOutcome, metricsOf, readyz, runFailover, sharedBudget, startPair, TOKEN_POINTS, type Pair } from './support/redis-failover.js';
import { metricSum } from '../kit/metrics.js';

describe('Redis Cluster', () => {
  let cluster: RedisCluster;
  let pair: Pair;

  beforeAll(async () => {
    cluster = await startRedisCluster();
    pair = await startPair({ REDIS_CLUSTER_NODES: cluster.startupNodes().map((n) => `${n.host}:${n.port}`).join(',') });
  }, 90_000);

  afterAll(async () => {
    await pair?.dispose();
    await stopAll();
  });

  afterEach((context) => {
    if (context.task.result?.state === 'fail' && pair) console.log(`A:\n${pair.a.output().slice(-3000)}\nB:\n${pair.b.output().slice(-3000)}`);
  });

  it('reports the three masters and shares rate limits of agents on every slot', async () => {
    const ready = await readyz(pair.a);
    expect(ready.checks.redis).toBe(true);
    const masters = (await cluster.masters()).map((m) => `127.0.0.1:${m.port}`).sort();
    expect(ready.checks.redis_topology).toMatchObject({ topology: 'cluster', primaries: masters, cache: 'in use' });
    expect(metricSum(await metricsOf(pair.b), 'ace_redis_topology_info', { topology: 'cluster' })).toBe(3);

    // One agent's budget here, another's after the failover (test below): keys on different slots.
    const admin = new AdminClient(pair.a);
    const { platform, agent } = await admin.seed(['orders:read']);
    expect(await sharedBudget(pair, agent, platform.platform_id)).toEqual({ ok: TOKEN_POINTS, limited: 10, other: [] });
  }, 90_000);

  it('keeps answering through a master failover, refuses a deactivated agent at the other instance within 1 s of it, loses nothing', async () => {
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
    await expectFailoverOutcome(pair, outcome, 'cluster');
    await expect.poll(async () => (await readyz(pair.b)).checks.redis_topology.primaries, { timeout: 15_000 }).toContain(`127.0.0.1:${replica!.port}`);
    const fresh = await outcome.admin.createAgent('after-failover');
    await outcome.admin.grant(fresh.agent_id, outcome.platformId, ['orders:read']);
    expect(await sharedBudget(pair, fresh, outcome.platformId)).toEqual({ ok: TOKEN_POINTS, limited: 10, other: [] });
  }, 120_000);

  it('refuses to start with a cluster node as REDIS_URL, naming the setting to use', async () => {
    const [node] = cluster.startupNodes();
    const run = await runToExit({ ...pair.a.env, REDIS_CLUSTER_NODES: '', REDIS_URL: `redis://${node.host}:${node.port}`, PORT: '0', ADMIN_PORT: '0' });
    expect(run.code).not.toBe(0);
    expect(run.output).toContain('REDIS_CLUSTER_NODES');
  });
});
