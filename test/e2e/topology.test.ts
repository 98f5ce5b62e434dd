// Smoke test of the topology kit (kit/topology): each production data topology starts on its
// own loopback ports, carries data as it should, survives its failover, and is torn down without
// leftovers. Later suites run the service itself on these.
import { existsSync, readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { Cluster, Redis } from 'ioredis';
import { childrenOf } from '../../kit/proc.js';
import {
  leftovers, promote, startPgBouncer, startPostgres, startRedisCluster, startRedisSentinelGroup, startStandby, stopAll,
  pollFor, waitForReplay,
} from '../../kit/topology/index.js';

afterAll(async () => {
  await stopAll();
});

function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

describe('topology kit', () => {
  it('Postgres primary + hot standby behind PgBouncer (transaction mode), then a switchover', async () => {
    const primary = await startPostgres();
    const standby = await startStandby(primary);
    expect(primary.port).toBeLessThan(32_768);
    expect(standby.port).not.toBe(primary.port);
    expect(standby.role).toBe('standby');

    // Written on the primary, read on the standby; the standby refuses writes.
    await primary.query('CREATE TABLE t (id int PRIMARY KEY, v text)');
    await primary.query("INSERT INTO t VALUES (1, 'before switchover')");
    await waitForReplay(primary, standby);
    expect(await standby.query('SELECT v FROM t WHERE id = 1')).toEqual([{ v: 'before switchover' }]);
    await expect(standby.query("INSERT INTO t VALUES (2, 'x')")).rejects.toMatchObject({ code: '25006' });

    // Through PgBouncer with the driver's defaults: a write lands on the primary.
    const bouncer = await startPgBouncer({ upstream: primary });
    const viaBouncer = bouncer.client();
    try {
      await viaBouncer`INSERT INTO t VALUES (3, 'via pgbouncer')`;
      expect(await primary.query('SELECT v FROM t WHERE id = 3')).toEqual([{ v: 'via pgbouncer' }]);
      const [{ port }] = await viaBouncer`SELECT current_setting('port') AS port`;
      expect(Number(port)).toBe(primary.port);
    } finally {
      await viaBouncer.end();
    }
    // Transaction mode: a second client connection, opened while the first is still connected, gets the
    // same server backend once the first one's transaction is over (session mode would pin it).
    const a = bouncer.client('postgres', { max: 1, prepare: false });
    const b = bouncer.client('postgres', { max: 1, prepare: false });
    try {
      const [{ pid: pidA }] = await a`SELECT pg_backend_pid() AS pid`;
      const [{ pid: pidB }] = await b`SELECT pg_backend_pid() AS pid`;
      expect(pidB).toBe(pidA);
    } finally {
      await a.end();
      await b.end();
    }

    // Switchover: the standby catches up, is promoted, the old primary stops, the pooler points at the new one.
    await waitForReplay(primary, standby);
    await promote(standby);
    expect(standby.role).toBe('primary');
    await primary.stop();
    expect(primary.running).toBe(false);
    await standby.query("INSERT INTO t VALUES (4, 'after switchover')");
    await bouncer.retarget(standby);
    const after = bouncer.client('postgres', { prepare: false });
    try {
      await after`INSERT INTO t VALUES (5, 'via pgbouncer after switchover')`;
      const rows = await after`SELECT id FROM t ORDER BY id`;
      expect(rows.map((r) => r.id)).toEqual([1, 3, 4, 5]);
    } finally {
      await after.end();
    }
  }, 60_000);

  it('Redis primary + replica + 3 sentinels: killing the primary makes the sentinels report the replica', async () => {
    const group = await startRedisSentinelGroup();
    expect(group.masterName).toBe('acemaster');
    expect(await group.getMaster()).toEqual({ host: '127.0.0.1', port: group.primary.port });

    const client = new Redis({ sentinels: group.sentinelAddresses(), name: group.masterName, sentinelRetryStrategy: () => 100, retryStrategy: () => 100 });
    client.on('error', () => {}); // reconnects during the failover are expected; results are asserted below
    try {
      await client.set('k', 'before failover');
      // Replicated to the replica before the kill, so the failover loses nothing.
      expect(await group.primary.command('WAIT', 1, 5_000)).toBe(1);

      const { killed, promoted } = await group.failover();
      expect(killed.port).toBe(group.primary.port);
      expect(killed.running).toBe(false);
      expect(promoted.port).toBe(group.replica.port);
      expect(await group.getMaster()).toEqual({ host: '127.0.0.1', port: group.replica.port });

      // A sentinel-aware client follows: it writes to the new master and reads what was written before.
      await pollFor('ioredis (sentinel) to write to the new master', async () => (await client.set('k2', 'after failover')) === 'OK');
      expect(await group.replica.command('GET', 'k2')).toBe('after failover');
      expect(await client.get('k')).toBe('before failover');
    } finally {
      client.disconnect();
    }
  }, 60_000);

  it('Redis Cluster of 6: keys spread over all three masters, and a killed master is replaced by its replica', async () => {
    const cluster = await startRedisCluster();
    expect(cluster.nodes.length).toBe(6);
    for (const n of cluster.nodes) expect(n.port + 10_000).toBeLessThan(32_768);
    const masters = await cluster.masters();
    expect(masters.length).toBe(3);
    // Replica roles reach the node asked by gossip: wait for all three rather than read one snapshot.
    const replicas = await pollFor('three replicas in the cluster view', async () => {
      const count = (await cluster.topology()).filter((t) => t.role === 'replica').length;
      return count === 3 ? count : undefined;
    }, { timeoutMs: 20_000 });
    expect(replicas).toBe(3);

    const client = new Cluster(cluster.startupNodes(), { clusterRetryStrategy: () => 100 });
    client.on('error', () => {}); // the killed master's connection errors are expected; results are asserted below
    try {
      const keys = Array.from({ length: 2_000 }, (_, i) => `key:${i}`);
      await Promise.all(keys.map((k) => client.set(k, k)));
      const perMaster = await Promise.all(masters.map(async (m) => Number(await m.command('DBSIZE'))));
      for (const count of perMaster) expect(count).toBeGreaterThan(0);
      expect(perMaster.reduce((x, y) => x + y, 0)).toBe(keys.length);
      // Every master's writes are on its replica before one is killed.
      for (const m of masters) expect(await m.command('WAIT', 1, 5_000)).toBe(1);

      const { killed, promoted } = await cluster.failover(masters[0].port);
      expect(killed.running).toBe(false);
      expect(promoted.port).not.toBe(killed.port);
      const newTopo = await cluster.topology();
      expect(newTopo.find((t) => t.port === promoted.port)).toMatchObject({ role: 'master', failing: false });
      expect(newTopo.find((t) => t.port === killed.port)?.failing).toBe(true);
      expect((await cluster.masters()).map((m) => m.port).sort()).toEqual([promoted.port, masters[1].port, masters[2].port].sort());

      // The client finds the new owner of the dead master's slots: every key reads back, new writes work.
      await pollFor('ioredis Cluster to read every key after the failover', async () => {
        const values = await Promise.all(keys.map((k) => client.get(k)));
        return values.every((v, i) => v === keys[i]);
      });
      await Promise.all(keys.map((k) => client.set(k, `${k}:after`)));
      expect(await client.get('key:0')).toBe('key:0:after');
    } finally {
      client.disconnect();
    }
  }, 60_000);

  it('stopAll leaves no process and no temp folder behind', async () => {
    const pg = await startPostgres();
    const before = leftovers();
    expect(before.pids).toContain(pg.pid);
    // The postmaster's own children (checkpointer, walwriter, ...) must go with it too.
    const pgChildren = childrenOf(pg.pid);
    expect(pgChildren.length).toBeGreaterThan(0);
    expect(before.dirs.length).toBeGreaterThan(0);
    for (const dir of before.dirs) expect(existsSync(dir)).toBe(true);

    await stopAll();
    const after = leftovers();
    expect(after).toEqual({ pids: [], dirs: [] });
    for (const pid of [...before.pids, ...pgChildren]) expect(running(pid)).toBe(false);
    for (const dir of before.dirs) expect(existsSync(dir)).toBe(false);
  }, 60_000);
});
