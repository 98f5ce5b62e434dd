// Storage of one service process: Postgres (or the embedded PGlite), migrations, Redis (one server,
// Sentinel or Cluster) and the invalidation bus when Redis is configured, and the cached store the domain
// reads through.
import type { Config } from '../config/config.js';
import { parseHostPorts } from '../config/redis-settings.js';
import type { Logger } from '../adapters/telemetry/logger.js';
import type { AppMetrics } from './metrics.js';
import type { CacheMetrics } from '../adapters/cache/index.js';
import { connectPostgres } from '../adapters/postgres/connect.js';
import { PostgresStore } from '../adapters/postgres/postgres-store.js';
import { migrate } from '../adapters/postgres/migrate.js';
import { describeNoPrimary, PrimaryProbe, type PrimaryState } from '../adapters/postgres/primary-probe.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../adapters/postgres/embedded/pglite-server.js';
import {
  askSentinels,
  closeRedis,
  connectRedis,
  inspectRedis,
  RedisSettingError,
  settingErrorFrom,
  TOPOLOGY_SETTING,
  untilReadyOr,
  verifyRedis,
  type RedisClient,
  type RedisReport,
  type RedisTopology,
} from '../adapters/cache/redis.js';
import { LocalBus, RedisBus } from '../adapters/cache/invalidation-bus.js';
import { RedisBreaker, type BreakerConnection } from '../adapters/cache/redis-breaker.js';
import type { InvalidationBus } from '../core/ports/invalidation.js';
import { CachedStore } from '../adapters/cache/cached-store.js';
import type { Cleanups } from './cleanups.js';
import { ThrottledLog } from '../adapters/telemetry/throttled-log.js';

/** How often the cache's trust flips are logged at most (each message once, then a count). */
const CACHE_TRUST_LOG_INTERVAL_MS = 10_000;

/** Bound on the start-up check of the primary: the first connection (or PGlite loading) may take a while. */
const STARTUP_CHECK_MS = 60_000;
/** Pause between two start-up attempts to reach a writable primary. */
const STARTUP_RETRY_MS = 1000;
/** While a Redis breaker is open, a PING this often (each bounded by the command deadline). */
const BREAKER_CHECK_MS = 500;
/** A PING on the bus's subscribed connection this often, so a half-open one is noticed (invalidation-bus.ts). */
const BUS_HEARTBEAT_MS = 1000;

export interface Stores {
  /** The Postgres URL in use (the embedded server's when DATABASE_URL is unset). */
  databaseUrl: string;
  embedded: boolean;
  sql: ReturnType<typeof connectPostgres>;
  postgres: PostgresStore;
  /** Which server the pool writes to, and whether it takes writes (for /readyz and /metrics). */
  primary: PrimaryProbe;
  redis: RedisClient | undefined;
  /** What /readyz and the topology metric report about Redis; undefined without Redis. */
  redisStatus: RedisStatus | undefined;
  bus: InvalidationBus;
  store: CachedStore;
}

/** Starts the embedded Postgres when no DATABASE_URL is set (only one process may own DATA_DIR). */
export async function startDatabase(config: Config): Promise<{ url: string; embedded?: EmbeddedPostgres }> {
  if (config.databaseUrl) return { url: config.databaseUrl };
  const embedded = await startEmbeddedPostgres(config.dataDir);
  return { url: embedded.url, embedded };
}

export async function startStores(config: Config, logger: Logger, metrics: AppMetrics, cleanups: Cleanups): Promise<Stores> {
  const database = await startDatabase(config);
  if (database.embedded) cleanups.add(() => database.embedded!.stop());
  if (database.embedded?.cluster === 'seeded') logger.info({ dataDir: config.dataDir }, 'embedded database created from the pristine cluster');
  // The build packs a pristine cluster (scripts/pristine-cluster.mjs); without it PGlite's initdb ran here.
  if (database.embedded?.cluster === 'initdb') logger.warn({ dataDir: config.dataDir }, "embedded database created by PGlite's initdb (no pristine cluster for this PGlite version in dist: run npm run build; or DATA_DIR/pglite held other files); this first start peaks ~800 MiB");
  const embedded = !config.databaseUrl;
  const sql = connectPostgres({ url: database.url, poolSize: embedded ? 1 : config.databasePoolSize, timeoutMs: config.storeTimeoutMs, embedded });
  const postgres = new PostgresStore({ sql, timeoutMs: config.storeTimeoutMs, onHealth: (up) => metrics.health.setStoreUp('postgres', up) });
  cleanups.add(() => postgres.close());
  const primary = new PrimaryProbe({ sql, url: database.url, timeoutMs: config.storeTimeoutMs, embedded, registry: metrics.registry });
  // Migrations (and then key management) only on a writable primary; say which setting to look at.
  const state = await untilWritablePrimary(primary, { embedded, attemptMs: config.storeTimeoutMs, logger });
  logger.info({ server: state.server }, 'postgres primary');
  const applied = await migrate(sql);
  if (applied.length > 0) logger.info({ migrations: applied }, 'database migrated');
  metrics.health.setStoreUp('postgres', true);

  let redis: RedisClient | undefined;
  let redisStatus: RedisStatus | undefined;
  let bus: InvalidationBus = new LocalBus();
  const topology = redisTopology(config);
  if (topology) {
    // Sentinels that answer but do not know the master name (or refuse the password): refuse at once.
    if (topology.kind === 'sentinel') await askSentinels(topology, Math.min(config.storeTimeoutMs, 1000));
    const commandTimeoutMs = Math.min(config.storeTimeoutMs, 500);
    const connected = connectRedis(topology, commandTimeoutMs, (up) => metrics.health.setStoreUp('redis', up));
    const subscriber = connectRedis(topology, commandTimeoutMs);
    // A half-open Redis is gone around as a down one is; never silently: a gauge and a line each way.
    const breaker = (client: RedisClient, connection: BreakerConnection) => {
      metrics.cache.setRedisBreakerOpen(connection, false);
      return new RedisBreaker({
        client,
        connection,
        checkEveryMs: BREAKER_CHECK_MS,
        onChange: (open, why) => {
          metrics.cache.setRedisBreakerOpen(connection, open);
          if (open) logger.warn({ connection, why }, 'Redis breaker open: a connection stayed silent past its deadline (half-open or hung); going around Redis (limits per process, reads from Postgres, invalidations in process) until a PING answers');
          else logger.info({ connection }, 'Redis breaker closed: PING answered, Redis in use again');
        },
      });
    };
    const breakers = [breaker(connected, 'commands'), breaker(subscriber, 'subscriber')];
    redis = connected;
    bus = new RedisBus({
      publisher: connected,
      subscriber,
      channel: `${config.redisKeyPrefix}invalidate`,
      onFailure: (operation) => metrics.cache.redisFailed(operation),
      heartbeatMs: BUS_HEARTBEAT_MS,
    });
    cleanups.add(() => {
      for (const b of breakers) b.stop();
      closeRedis(connected);
      closeRedis(subscriber);
    });
    redisStatus = new RedisStatus({ topology, client: connected, breaker: breakers[0], metrics: metrics.cache, logger });
    await redisStatus.start(config.storeTimeoutMs);
  }

  // A full Redis fails every cache write and each one flips trust: one line per interval, with a count.
  const trustLog = new ThrottledLog({ logger, intervalMs: CACHE_TRUST_LOG_INTERVAL_MS });
  const store = new CachedStore({
    inner: postgres,
    redis,
    keyPrefix: `${config.redisKeyPrefix}c:`,
    redisTtlSeconds: config.cacheTtlSeconds,
    localTtlMs: config.localCacheTtlMs,
    localMaxEntries: config.localCacheMaxEntries,
    bus,
    metrics: metrics.cache,
    onTrust: (trusted, why) =>
      trusted ? trustLog.log('info', {}, 'Redis cache swept: in use again') : trustLog.log('warn', { why }, 'Redis cache bypassed until swept (reads go to Postgres)'),
  });
  return { databaseUrl: database.url, embedded, sql, postgres, primary, redis, redisStatus, bus, store };
}

/**
 * Start-up: tries to reach a writable primary until STARTUP_CHECK_MS has passed, logging each failed
 * attempt with its cause (refused, unreachable, authentication, missing database, standby), so a
 * database that stays away is never silent; then stops start-up naming the last cause. The embedded
 * database is checked once, with the whole bound (PGlite may take seconds to load).
 */
async function untilWritablePrimary(primary: PrimaryProbe, options: { embedded: boolean; attemptMs: number; logger: Logger }): Promise<PrimaryState> {
  const deadline = Date.now() + STARTUP_CHECK_MS;
  for (let attempt = 1; ; attempt++) {
    const attemptMs = options.embedded ? STARTUP_CHECK_MS : Math.min(options.attemptMs, Math.max(1, deadline - Date.now()));
    const checked = await primary.check(attemptMs);
    if (checked.writable) return checked;
    const state = await primary.explain(checked, attemptMs);
    const cause = describeNoPrimary(state.reason, attemptMs);
    const server = state.server === 'none' ? undefined : state.server;
    if (options.embedded || Date.now() + STARTUP_RETRY_MS >= deadline) {
      throw new Error(`DATABASE_URL: no writable primary among its hosts after ${attempt} attempt(s) in ${Math.round(STARTUP_CHECK_MS / 1000)} s (${server ? `${server}: ` : ''}${cause})`);
    }
    options.logger.warn({ attempt, ...(server ? { server } : {}), code: state.reason, cause }, `postgres: no writable primary yet (${cause}); trying again`);
    await new Promise((resolve) => setTimeout(resolve, STARTUP_RETRY_MS));
  }
}

/** The Redis topology the settings name (validated by loadConfig), or undefined: no Redis. */
export function redisTopology(config: Config): RedisTopology | undefined {
  const password = config.redisPassword;
  const tls = config.redisTls || undefined;
  const unused: string[] = []; // loadConfig already refused malformed lists
  if (config.redisSentinels) {
    return {
      kind: 'sentinel',
      sentinels: parseHostPorts(config.redisSentinels, 'REDIS_SENTINELS', unused),
      masterName: config.redisSentinelMaster,
      password,
      sentinelPassword: config.redisSentinelPassword,
      tls,
    };
  }
  if (config.redisClusterNodes) return { kind: 'cluster', nodes: parseHostPorts(config.redisClusterNodes, 'REDIS_CLUSTER_NODES', unused), password, tls };
  if (config.redisUrl) return { kind: 'standalone', url: config.redisUrl, password, tls };
  return undefined;
}

/**
 * Redis as /readyz and the metrics see it. A configuration that Redis shows to be wrong stops start-up
 * (RedisSettingError names the setting). Redis not answering at start is not a configuration error, but
 * the process is not ready until Redis has answered once and been verified: a shared store was asked for,
 * and a typo must not run for good on in-process limits. After that, Redis is an accelerator: an outage
 * degrades to Postgres and in-process limits without pulling the instance out of the load balancer.
 */
export interface RedisStatusOptions {
  topology: RedisTopology;
  /** The command connection: its errors and readiness are what is watched and verified. */
  client: RedisClient;
  /** Its breaker: while open, Redis counts as down whatever one check says. */
  breaker?: Pick<RedisBreaker, 'isOpen'>;
  metrics: Pick<CacheMetrics, 'setRedisTopology'>;
  logger: Logger;
}

export class RedisStatus {
  readonly topology: RedisTopology;
  private readonly client: RedisClient;
  private readonly breaker: Pick<RedisBreaker, 'isOpen'> | undefined;
  private readonly metrics: Pick<CacheMetrics, 'setRedisTopology'>;
  private readonly logger: Logger;
  private verified = false;
  private refusal: RedisSettingError | undefined;
  private lastError: Error | undefined;

  constructor({ topology, client, breaker, metrics, logger }: RedisStatusOptions) {
    this.topology = topology;
    this.client = client;
    this.breaker = breaker;
    this.metrics = metrics;
    this.logger = logger;
    const noteError = (error: Error) => {
      this.lastError = error;
      this.refusal ??= settingErrorFrom(topology, error);
    };
    client.on('error', noteError);
    client.on('node error', noteError);
    client.on('ready', () => void this.verify());
    metrics.setRedisTopology(topology.kind, []);
  }

  /** Has Redis answered and been verified since start? */
  get verifiedOnce(): boolean {
    return this.verified;
  }

  /** Waits up to `timeoutMs` for Redis; throws RedisSettingError for a configuration that cannot work. */
  async start(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.verified && !this.refusal && Date.now() < deadline) {
      if (this.client.status === 'ready') await this.verify();
      else await untilReadyOr(this.client, Math.max(1, Math.min(100, deadline - Date.now())));
    }
    if (this.refusal) throw this.refusal;
    if (!this.verified) {
      this.logger.error(
        { setting: TOPOLOGY_SETTING[this.topology.kind], topology: this.topology.kind, error: this.lastError?.message.slice(0, 200) },
        'Redis not reachable at start: not ready until it answers (tokens would otherwise use per-process limits)',
      );
    }
  }

  private async verify(): Promise<void> {
    try {
      const report = await verifyRedis(this.topology, this.client);
      if (!this.verified) this.logger.info({ topology: report.topology, primaries: report.primaries }, 'Redis in use');
      this.verified = true;
      this.metrics.setRedisTopology(report.topology, report.primaries);
    } catch (error) {
      if (error instanceof RedisSettingError && !this.verified) this.refusal = error;
      else this.lastError = error as Error;
    }
  }

  /** For /readyz: `blocksReadiness` until Redis was verified once (or while its configuration is refused). */
  async check(): Promise<{ up: boolean; blocksReadiness: boolean; detail: Record<string, unknown> }> {
    if (!this.verified && !this.refusal && this.client.status === 'ready') await this.verify();
    const report: RedisReport = this.verified ? await inspectRedis(this.topology, this.client) : { topology: this.topology.kind, up: false, primaries: [] };
    if (report.up && this.breaker?.isOpen) {
      report.up = false;
      report.problem = 'breaker open: a connection stayed silent past its deadline; gone around until a PING answers';
    }
    if (report.up) this.metrics.setRedisTopology(report.topology, report.primaries);
    const problem = this.refusal?.message ?? report.problem ?? (this.verified ? undefined : `not reached yet (${TOPOLOGY_SETTING[this.topology.kind]})`);
    return {
      up: report.up,
      blocksReadiness: !this.verified,
      detail: {
        topology: report.topology,
        primaries: report.primaries,
        ...(problem ? { problem } : {}),
      },
    };
  }
}
