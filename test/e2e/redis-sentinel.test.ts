// Redis through Sentinel (REDIS_SENTINELS + REDIS_SENTINEL_MASTER) on a real primary + replica + three
// sentinels (kit/topology): two instances keep answering while the primary is killed and the
// replica promoted, a deactivation during the failover is refused at the other instance within 1 s of it,
// rate limits stay shared before and after, and start-up refuses a master name the sentinels do not know.
// The harness (life cycle, scenario, shared checks) is test/support/redis-failover.ts.
import { describe, expect, it } from 'vitest';
import { startRedisSentinelGroup } from '../../kit/topology/index.js';
import { expectFailoverOutcome, expectStartRefused, expectTopologyAndSharedLimits, readyz, runFailover, failoverSuite } from '../support/redis-failover.js';

describe('Redis Sentinel', () => {
  const suite = failoverSuite(async () => {
    // A failover attempt that fails (a split vote on a loaded machine) is retried after twice the
    // failover-timeout: 10 s rather than Redis's 20 s at the topology kit's default.
    const group = await startRedisSentinelGroup({ downAfterMs: 1000, failoverTimeoutMs: 5000 });
    const env = {
      REDIS_SENTINELS: group.sentinelAddresses().map((s) => `${s.host}:${s.port}`).join(','),
      REDIS_SENTINEL_MASTER: group.masterName,
    };
    return { topology: group, env };
  });

  it('reports the topology and its master, and shares rate limits across instances', async () => {
    const primary = `127.0.0.1:${suite.topology.primary.port}`;
    await expectTopologyAndSharedLimits(suite.pair, { topology: 'sentinel', primaries: [primary] }, { labels: { topology: 'sentinel', primary }, value: 1 });
  });

  it('keeps answering through a failover, refuses a deactivated agent at the other instance within 1 s of it, loses nothing', async () => {
    const { pair, topology: group } = suite;
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
    // Also: limits shared on the new master.
    await expectFailoverOutcome(pair, outcome, 'sentinel');
    const promoted = await group.currentMaster();
    expect((await readyz(pair.b)).checks.redis_topology.primaries).toEqual([`127.0.0.1:${promoted.port}`]);
  }, 90_000);

  it('refuses to start with a master name the sentinels do not know, naming the setting', async () => {
    await expectStartRefused(suite.pair, { ...suite.env, REDIS_SENTINEL_MASTER: 'no-such-master' }, ['REDIS_SENTINEL_MASTER', 'no-such-master']);
  });
});
