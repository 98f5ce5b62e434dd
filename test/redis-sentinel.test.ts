// Redis through Sentinel (REDIS_SENTINELS + REDIS_SENTINEL_MASTER) on a real primary + replica + three
// sentinels (test/support/topology): two instances keep answering while the primary is killed and the
// replica promoted, a deactivation during the failover is refused at the other instance within 1 s of it,
// rate limits stay shared before and after, and start-up refuses a master name the sentinels do not know.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient } from '../kit/admin.js';
import { runToExit } from './support/service.js';
import { startRedisSentinelGroup, stopAll, type RedisSentinelGroup } from './support/topology/index.js';
import { expectFailoverOutcome, metricsOf, readyz, runFailover, sharedBudget, startPair, TOKEN_POINTS, type Pair } from './support/redis-failover.js';
import { metricSum } from '../kit/metrics.js';

describe('Redis Sentinel', () => {
  let group: RedisSentinelGroup;
  let pair: Pair;
  let env: Record<string, string>;

  beforeAll(async () => {
    group = await startRedisSentinelGroup({ downAfterMs: 1000 });
    env = {
      REDIS_SENTINELS: group.sentinelAddresses().map((s) => `${s.host}:${s.port}`).join(','),
      REDIS_SENTINEL_MASTER: group.masterName,
    };
    pair = await startPair(env);
  }, 90_000);

  afterAll(async () => {
    await pair?.dispose();
    await stopAll();
  });

  afterEach((context) => {
    // A failed run shows what the services logged (no secret is logged; see docs/operations.md).
    if (context.task.result?.state === 'fail' && pair) console.log(`A:\n${pair.a.output().slice(-3000)}\nB:\n${pair.b.output().slice(-3000)}`);
  });

  it('reports the topology and its master, and shares rate limits across instances', async () => {
    const ready = await readyz(pair.a);
    expect(ready.checks.redis).toBe(true);
    expect(ready.checks.redis_topology).toMatchObject({ topology: 'sentinel', primaries: [`127.0.0.1:${group.primary.port}`], cache: 'in use' });
    expect(metricSum(await metricsOf(pair.b), 'ace_redis_topology_info', { topology: 'sentinel', primary: `127.0.0.1:${group.primary.port}` })).toBe(1);

    const admin = new AdminClient(pair.a);
    const { platform, agent } = await admin.seed(['orders:read']);
    const budget = await sharedBudget(pair, agent, platform.platform_id);
    expect(budget).toEqual({ ok: TOKEN_POINTS, limited: 10, other: [] });
  });

  it('keeps answering through a failover, refuses a deactivated agent at the other instance within 1 s of it, loses nothing', async () => {
    let killed: Awaited<ReturnType<typeof group.killPrimary>> | undefined;
    const outcome = await runFailover(
      pair,
      async () => {
        killed = await group.killPrimary();
      },
      async () => {
        await group.waitForNewMaster(killed!);
      },
    );
    await expectFailoverOutcome(pair, outcome, 'sentinel');
    const promoted = await group.currentMaster();
    expect((await readyz(pair.b)).checks.redis_topology.primaries).toEqual([`127.0.0.1:${promoted.port}`]);

    // Limits are shared on the new master too.
    const fresh = await outcome.admin.createAgent('after-failover');
    await outcome.admin.grant(fresh.agent_id, outcome.platformId, ['orders:read']);
    expect(await sharedBudget(pair, fresh, outcome.platformId)).toEqual({ ok: TOKEN_POINTS, limited: 10, other: [] });
  }, 90_000);

  it('refuses to start with a master name the sentinels do not know, naming the setting', async () => {
    const run = await runToExit({ ...pair.a.env, ...env, REDIS_SENTINEL_MASTER: 'no-such-master', PORT: '0', ADMIN_PORT: '0' });
    expect(run.code).not.toBe(0);
    expect(run.output).toContain('REDIS_SENTINEL_MASTER');
    expect(run.output).toContain('no-such-master');
  });
});
