// The bench's topologies scenario (bench/scenarios/topologies.ts): each arm hands the service the settings
// that name its topology (read here by the service's own parsers), one store changed at a time against the
// single-node baseline; the scenario is registered and kept out of the default run.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { redisTopology } from '../../src/app/stores.js';
import { parsePostgresUrl } from '../../src/support/postgres-url.js';
import { BASELINE, PG_CONTROL, REDIS_CONTROL, topologies, topologyList } from '../../bench/scenarios/topologies.js';
import { spreadShift } from '../../bench/lib/rounds.js';
import { SCENARIOS } from '../../bench/scenarios/index.js';
import { coldPoolSize } from '../../bench/lib/cold.js';

const pg = (port: number) => ({ host: '127.0.0.1', port, url: (db = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${db}` });
const fake = {
  bouncerPg: pg(21001),
  bouncer: { host: '127.0.0.1', port: 21002, url: (db = 'postgres') => `postgres://postgres@127.0.0.1:21002/${db}` },
  primary: pg(21003),
  standby: pg(21004),
  sentinel: { masterName: 'acemaster', sentinelAddresses: () => [21010, 21011, 21012].map((port) => ({ host: '127.0.0.1', port })) },
  cluster: { startupNodes: () => [21020, 21021, 21022, 21023, 21024, 21025].map((port) => ({ host: '127.0.0.1', port })) },
  redis: { url: () => 'redis://127.0.0.1:21030' },
} as unknown as Parameters<typeof topologyList>[0];

const db = (server: string) => ({ name: 'ace_bench_x', url: `${server.replace(/\/[^/]*$/, '')}/ace_bench_x`, drop: async () => {} });

/** What the service would be started with, as startBenchService builds it (baseline stores unless named). */
function serviceEnv(t: ReturnType<typeof topologyList>[number]): { DATABASE_URL: string; redis: Record<string, string>; createdOn: string } {
  const createdOn = t.options.pgAdminUrl ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const scratch = db(createdOn);
  return { DATABASE_URL: t.options.serviceDatabaseUrl?.(scratch) ?? scratch.url, redis: t.options.redisEnv ?? { REDIS_URL: 'redis://127.0.0.1:6379' }, createdOn };
}

describe('bench topologies scenario', () => {
  const list = topologyList(fake);
  const byKey = Object.fromEntries(list.map((t) => [t.key, t]));

  it('is registered under --only topologies and is not part of the default run', () => {
    expect(SCENARIOS).toContain(topologies);
    expect(topologies.name).toBe('topologies');
    expect(topologies.byDefault).toBe(false);
  });

  it('starts with the single-node baseline, which changes nothing', () => {
    expect(list[0].key).toBe(BASELINE);
    expect(list[0].options).toEqual({});
  });

  it('puts PgBouncer in front of its own Postgres, with a direct control row on the same server', () => {
    const bouncer = serviceEnv(byKey['PgBouncer (transaction)']);
    expect(bouncer.createdOn).toBe(fake.bouncerPg.url());
    expect(bouncer.DATABASE_URL).toBe('postgres://postgres@127.0.0.1:21002/ace_bench_x');
    expect(parsePostgresUrl(bouncer.DATABASE_URL).url).toMatchObject({ prepare: false, hosts: [{ port: 21002 }] });
    const direct = serviceEnv(byKey[PG_CONTROL]);
    expect(direct.DATABASE_URL).toBe('postgres://postgres@127.0.0.1:21001/ace_bench_x');
    expect(byKey['PgBouncer (transaction)'].control).toBe(PG_CONTROL);
  });

  it('names primary and standby in one libpq multi-host URL asking for read-write', () => {
    const { DATABASE_URL, createdOn } = serviceEnv(byKey['primary + standby']);
    expect(createdOn).toBe(fake.primary.url());
    expect(DATABASE_URL).toBe('postgres://postgres@127.0.0.1:21003,127.0.0.1:21004/ace_bench_x?target_session_attrs=read-write');
    const parsed = parsePostgresUrl(DATABASE_URL);
    expect(parsed.problems).toEqual([]);
    expect(parsed.url).toMatchObject({ target: 'primary', hosts: [{ host: '127.0.0.1', port: 21003 }, { host: '127.0.0.1', port: 21004 }] });
  });

  it('reaches Redis through the Sentinel settings and the Cluster seeds, as the service reads them', () => {
    expect(redisTopology(loadConfig(serviceEnv(byKey['Redis Sentinel']).redis))).toMatchObject({
      kind: 'sentinel',
      masterName: 'acemaster',
      sentinels: [{ host: '127.0.0.1', port: 21010 }, { host: '127.0.0.1', port: 21011 }, { host: '127.0.0.1', port: 21012 }],
    });
    expect(redisTopology(loadConfig(serviceEnv(byKey['Redis Cluster']).redis))).toMatchObject({ kind: 'cluster', nodes: expect.arrayContaining([{ host: '127.0.0.1', port: 21020 }]) });
    expect(redisTopology(loadConfig(serviceEnv(byKey[BASELINE]).redis))).toMatchObject({ kind: 'standalone', url: 'redis://127.0.0.1:6379' });
    expect(redisTopology(loadConfig(serviceEnv(byKey[REDIS_CONTROL]).redis))).toMatchObject({ kind: 'standalone', url: 'redis://127.0.0.1:21030' });
    expect([byKey['Redis Sentinel'].control, byKey['Redis Cluster'].control]).toEqual([REDIS_CONTROL, REDIS_CONTROL]);
  });

  it('changes one store per row: Postgres rows keep the baseline Redis, Redis rows the baseline Postgres', () => {
    for (const t of list.slice(1)) {
      const changesPostgres = t.options.pgAdminUrl !== undefined || t.options.serviceDatabaseUrl !== undefined;
      const changesRedis = t.options.redisEnv !== undefined;
      expect([t.key, changesPostgres !== changesRedis]).toEqual([t.key, true]);
    }
  });

  it('spreads the rounds\' starting points over the topologies, keeping warm and cold together', () => {
    const shift = spreadShift(7, 2, 3);
    expect([0, 1, 2].map(shift)).toEqual([0, 4, 10]);
    expect([0, 1, 2].map(spreadShift(6, 2, 3))).toEqual([0, 4, 8]);
    expect(spreadShift(6, 2, 1)(0)).toBe(0);
  });

  it('sizes each round of cold agents for twice the raw argon2 rate (at least the floor: 50/s unless told) plus two connections each', () => {
    expect(coldPoolSize(100, { duration: 5, warmup: 2, connections: 64 })).toBe(100 * 7 * 2 + 128);
    expect(coldPoolSize(10, { duration: 2, warmup: 1, connections: 64 })).toBe(50 * 3 * 2 + 128);
    expect(coldPoolSize(40, { duration: 5, warmup: 2, connections: 64 }, 150)).toBe(150 * 7 * 2 + 128);
  });
});
