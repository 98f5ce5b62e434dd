// Token throughput on each production data topology, in one run: the topologies are started
// with the topology kit (kit/topology), one compiled service against each, all up at once, and warm and
// cold tokens are measured in interleaved rounds (the order rotates each round). Each topology's figure is
// set against the single-node baseline (the machine's Postgres :5432 and Redis :6379) round by round, and
// the ratios reduced to their median with min–max, as compare does with its ceilings.
//
// Every service gets the same settings (bench/lib/service.ts) except the store settings that name its
// topology; the kit's Postgres servers get the baseline server's durability and memory settings (the kit's
// own defaults, fsync off, would flatter every row that writes to them).
import { hashSync } from '@node-rs/argon2';
import postgres from 'postgres';
import type { Scenario } from './types.js';
import type { BenchContext, ScenarioReport } from '../lib/context.js';
import { startBenchService, PG_ADMIN_URL, REDIS_URL, type BenchService, type StartOptions } from '../lib/service.js';
import { BulkAgents } from '../lib/bulk.js';
import { Workload, ColdPool, BULK_SECRET, post, TOKEN_PATH } from '../lib/workload.js';
import { interleave, loadArm, spreadShift, summaryRows, SUMMARY_HEADER, type Arm } from '../lib/rounds.js';
import { argon2Counter, coldArm, coldPoolSize } from '../lib/cold.js';
import { check, checkRows, CHECK_HEADER, type Check } from '../lib/checks.js';
import { formatSpread, pairedRatios, spread } from '../lib/stats.js';
import { table, type Measurement } from '../lib/report.js';
import { argon2VerifyRate } from '../limits/argon2-rate.js';
import { loadArgon2Options } from '../limits/argon2-options.js';
import {
  startPgBouncer, startPostgres, startRedis, startRedisCluster, startRedisSentinelGroup, startStandby, stopAll,
  type PgBouncerNode, type PostgresNode, type RedisCluster, type RedisSentinelGroup, type RedisServer,
} from '../../kit/topology/index.js';

export const topologies: Scenario = {
  name: 'topologies',
  title: 'warm and cold tokens/s on each production data topology (PgBouncer, Postgres primary + standby, Redis Sentinel, Redis Cluster) against the single node',
  // ~7 minutes with the default rounds and durations (14 measurements a round): not part of the default run.
  byDefault: false,
  run: (ctx) => ctx.scoped((defer) => runTopologies(ctx, defer)),
};

/** Settings of the baseline server copied onto the kit's Postgres servers, so every arm's server is alike. */
const COPIED_PG_SETTINGS = [
  'fsync', 'synchronous_commit', 'full_page_writes', 'wal_sync_method', 'shared_buffers', 'work_mem',
  'max_connections', 'max_wal_size', 'min_wal_size', 'checkpoint_timeout', 'autovacuum',
];

interface Started {
  bouncerPg: PostgresNode;
  bouncer: PgBouncerNode;
  primary: PostgresNode;
  standby: PostgresNode;
  sentinel: RedisSentinelGroup;
  cluster: RedisCluster;
  redis: RedisServer;
}

interface Topology {
  /** Row name, and the prefix of its arms' names. */
  key: string;
  /** What it is, in the settings the service gets (no secrets: the kit runs with trust auth). */
  describe: string;
  options: Partial<StartOptions>;
  /** The control row that differs from this one by the topology alone (the same kind of private server). */
  control?: string;
}

export const BASELINE = 'single node';
export const PG_CONTROL = 'kit Postgres, direct (control)';
export const REDIS_CONTROL = 'kit Redis, direct (control)';

/** The arms, baseline first. Exported for the unit test of the URLs and settings each topology names. */
export function topologyList(s: Started): Topology[] {
  const sentinels = s.sentinel.sentinelAddresses().map((a) => `${a.host}:${a.port}`).join(',');
  const clusterNodes = s.cluster.startupNodes().map((n) => `${n.host}:${n.port}`).join(',');
  const hosts = `${s.primary.host}:${s.primary.port},${s.standby.host}:${s.standby.port}`;
  return [
    { key: BASELINE, describe: `DATABASE_URL ${hostOf(PG_ADMIN_URL)}, REDIS_URL ${hostOf(REDIS_URL)} (the machine's servers)`, options: {} },
    {
      key: 'PgBouncer (transaction)',
      describe: `DATABASE_URL through PgBouncer :${s.bouncer.port} (pool_mode transaction, its defaults) to a kit Postgres :${s.bouncerPg.port}`,
      options: { pgAdminUrl: s.bouncerPg.url(), serviceDatabaseUrl: (db) => s.bouncer.url(db.name) },
      control: PG_CONTROL,
    },
    {
      key: PG_CONTROL,
      describe: `DATABASE_URL straight to the PgBouncer row's Postgres :${s.bouncerPg.port}: a private server with the baseline's settings, without the topology`,
      options: { pgAdminUrl: s.bouncerPg.url() },
    },
    {
      key: 'primary + standby',
      describe: `DATABASE_URL postgres://postgres@${hosts}/<db>?target_session_attrs=read-write (streaming replication, asynchronous)`,
      options: { pgAdminUrl: s.primary.url(), serviceDatabaseUrl: (db) => `postgres://postgres@${hosts}/${db.name}?target_session_attrs=read-write` },
      control: PG_CONTROL,
    },
    {
      key: 'Redis Sentinel',
      describe: `REDIS_SENTINELS ${sentinels}, REDIS_SENTINEL_MASTER ${s.sentinel.masterName} (primary + replica + 3 sentinels); Postgres :5432`,
      options: { redisEnv: { REDIS_SENTINELS: sentinels, REDIS_SENTINEL_MASTER: s.sentinel.masterName } },
      control: REDIS_CONTROL,
    },
    {
      key: 'Redis Cluster',
      describe: `REDIS_CLUSTER_NODES ${clusterNodes} (3 masters + 3 replicas); Postgres :5432`,
      options: { redisEnv: { REDIS_CLUSTER_NODES: clusterNodes } },
      control: REDIS_CONTROL,
    },
    {
      key: REDIS_CONTROL,
      describe: `REDIS_URL ${s.redis.url()}: one private Redis server (no replica), without the topology; Postgres :5432`,
      options: { redisEnv: { REDIS_URL: s.redis.url() } },
    },
  ];
}

function hostOf(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || (u.protocol.startsWith('redis') ? 6379 : 5432)}`;
  } catch {
    return '(unparsed)';
  }
}

/** The named settings of the Postgres server at `url`, as it states them (units included). */
async function serverSettings(url: string, names: string[]): Promise<Record<string, string>> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const rows = await sql`SELECT name, current_setting(name) AS value FROM unnest(${names}::text[]) AS name`;
    return Object.fromEntries(rows.map((r) => [r.name as string, r.value as string]));
  } finally {
    await sql.end();
  }
}

async function startTopologies(ctx: BenchContext, settings: Record<string, string>): Promise<Started> {
  const timeoutMs = 90_000; // a shared 2-core machine under load: the kit's waits are bounded, not short
  const [[bouncerPg, bouncer], [primary, standby], sentinel, cluster] = await Promise.all([
    (async () => {
      const pg = await startPostgres({ settings, timeoutMs });
      return [pg, await startPgBouncer({ upstream: pg, timeoutMs })] as const;
    })(),
    (async () => {
      const pg = await startPostgres({ settings, timeoutMs });
      return [pg, await startStandby(pg, { settings, timeoutMs })] as const;
    })(),
    startRedisSentinelGroup({ timeoutMs }),
    startRedisCluster({ timeoutMs }),
  ]);
  const redis = await startRedis({ timeoutMs });
  ctx.log(`  kit: PgBouncer :${bouncer.port} → Postgres :${bouncerPg.port}; primary :${primary.port} + standby :${standby.port}; ` +
    `sentinels ${sentinel.sentinels.map((n) => n.port).join(',')} (master :${sentinel.primary.port}); cluster ${cluster.nodes.map((n) => n.port).join(',')}; redis :${redis.port}`);
  return { bouncerPg, bouncer, primary, standby, sentinel, cluster, redis };
}

interface Arming {
  topology: Topology;
  service: BenchService;
  warmBodies: string[];
  coldPools: ColdPool[];
  failures: number[];
}

async function runTopologies(ctx: BenchContext, defer: (fn: () => Promise<void> | void) => void): Promise<ScenarioReport> {
  const { opts } = ctx;
  if (opts.embedded) throw new Error('topologies: needs Postgres and Redis (not --embedded)');
  // Registered first, so it runs last: after the services, even when a start below fails half-way (and on
  // SIGINT/SIGTERM, through the context's clean-up in run.ts).
  defer(() => stopAll());

  const pgSettings = await serverSettings(PG_ADMIN_URL, COPIED_PG_SETTINGS);
  ctx.log(`starting the topologies with the kit (Postgres settings copied from ${hostOf(PG_ADMIN_URL)}: ${Object.entries(pgSettings).map(([k, v]) => `${k}=${v}`).join(' ')}) ...`);
  const started = await startTopologies(ctx, pgSettings);
  const list = topologyList(started);

  const { options: argon2Options } = await loadArgon2Options();
  const secretHash = hashSync(BULK_SECRET, argon2Options);
  const sizing = await argon2VerifyRate(opts.cores, 1);
  // Sized for at least 150 verifications a second: the rate measured at the start of a long run on a busy
  // machine understated a quieter minute later, and a pool ran dry (rows are cheap, argon2 time is not).
  const perRound = coldPoolSize(sizing.verifyPerSecond, opts, 150);

  // One service per topology, all up for the whole run (an idle service costs nothing measurable).
  const armings: Arming[] = [];
  for (const topology of list) {
    ctx.log(`starting the service on ${topology.key}: ${topology.describe} ...`);
    const service = await startBenchService({
      embedded: false,
      uvThreads: opts.uvThreads,
      env: opts.workers ? { WORKERS: String(opts.workers) } : {},
      ...topology.options,
    });
    defer(() => service.dispose());
    const work = new Workload(ctx, service);
    await work.seed(opts.warmAgents);
    // Cold agents as bulk rows, written straight to the server (not through the pooler), as in compare.
    const bulk = new BulkAgents(service.databaseUrl!, secretHash);
    let ids: string[];
    try {
      await bulk.add(perRound * opts.rounds, 'cold');
      ids = await bulk.apiKeyIds('cold');
      await bulk.settle();
    } finally {
      await bulk.end();
    }
    const coldPools = Array.from({ length: opts.rounds }, (_, r) =>
      new ColdPool(ids.slice(r * perRound, (r + 1) * perRound).map((id) => JSON.stringify({ api_key_id: id, secret: BULK_SECRET, platform_id: work.platformId }))));
    await work.prewarm(service.httpProcesses);
    ctx.log(`  up: ${service.httpProcesses} HTTP process(es); ${opts.warmAgents} warm agents, ${ids.length} cold agents as bulk rows`);
    armings.push({ topology, service, warmBodies: work.tokenBodies(), coldPools, failures: [] });
  }

  const arms: Arm<Measurement>[] = armings.flatMap((a) => {
    const url = () => a.service.publicUrl;
    const countArgon2 = argon2Counter(a.service.adminUrl);
    const serviceHooks = (extra: Parameters<typeof loadArm>[4] = {}) => ({
      ...extra,
      after: async (m: Measurement, round: number) => {
        await extra.after?.(m, round);
        a.failures[round] = (a.failures[round] ?? 0) + m.non2xx + m.errors;
      },
    });
    const warm = post(TOKEN_PATH, a.warmBodies);
    return [
      loadArm(ctx, `${a.topology.key}: warm`, url, () => warm, serviceHooks(countArgon2)),
      coldArm(ctx, `${a.topology.key}: cold`, url, a.coldPools, serviceHooks, countArgon2),
    ];
  });
  ctx.log(`${opts.rounds} interleaved round(s) of ${arms.length} measurements, ${opts.duration}s each after ${opts.warmup}s warm-up ...`);
  // Each topology's warm and cold arms stay adjacent; the rounds start at evenly spread topologies.
  const results = await interleave(ctx, opts.rounds, arms, spreadShift(list.length, 2, opts.rounds));

  const rps = (name: string) => (results[name] ?? []).map((m) => (m && !m.invalid ? m.rps : undefined));
  const figure = (name: string) => formatSpread(spread(rps(name).filter((v): v is number => v !== undefined)));
  const ratio = (key: string, kind: 'warm' | 'cold', over = BASELINE) => pairedRatios(rps(`${key}: ${kind}`), rps(`${over}: ${kind}`));
  const rows = list.map((t) => [
    t.key,
    figure(`${t.key}: warm`),
    t.key === BASELINE ? '1 (baseline)' : formatSpread(spread(ratio(t.key, 'warm')), 2),
    figure(`${t.key}: cold`),
    t.key === BASELINE ? '1 (baseline)' : formatSpread(spread(ratio(t.key, 'cold')), 2),
  ]);
  const checks: Check[] = [
    ...list.filter((t) => t.key !== BASELINE).flatMap((t) => [
      check(`${t.key}: warm / single node`, ratio(t.key, 'warm'), null),
      check(`${t.key}: cold / single node`, ratio(t.key, 'cold'), null),
    ]),
    // The topology alone: each row over the control that has the same kind of private server without it.
    ...list.filter((t) => t.control).flatMap((t) => [
      check(`${t.key}: warm / ${t.control}`, ratio(t.key, 'warm', t.control), null),
      check(`${t.key}: cold / ${t.control}`, ratio(t.key, 'cold', t.control), null),
    ]),
    ...armings.map((a) => check(`${a.topology.key}: non-2xx + errors`, a.failures, { op: '=', value: 0 })),
  ];
  const settings = `${list.length} topologies, one service each (same settings: ${armings[0]?.service.httpProcesses ?? '?'} HTTP process(es), UV_THREADPOOL_SIZE ${opts.uvThreads}, ` +
    `limits lifted as in compare), all up for the whole run; ${opts.rounds} round(s), ${opts.connections} connections, ${opts.duration}s after ${opts.warmup}s warm-up; ` +
    `warm = ${opts.warmAgents} agents verified beforehand (no argon2), cold = a never-seen agent per request (one argon2 each); ratios taken round by round, then the median (min–max)`;
  return {
    name: 'topologies',
    text: [
      settings,
      list.map((t) => `  ${t.key}: ${t.describe}`).join('\n'),
      table(rows, ['topology', 'warm req/s (min–max)', 'warm vs single-node', 'cold req/s (min–max)', 'cold vs single-node']),
      table(summaryRows(results), SUMMARY_HEADER),
      table(checkRows(checks), CHECK_HEADER),
    ],
    checks,
    data: {
      topologies: list.map((t) => ({ name: t.key, settings: t.describe })),
      postgres_settings_copied: pgSettings,
      cold_agents_per_round: perRound,
      table: rows.map(([topology, warm, warmRatio, cold, coldRatio]) => ({ topology, warm, warm_vs_single_node: warmRatio, cold, cold_vs_single_node: coldRatio })),
      results,
    },
  };
}
