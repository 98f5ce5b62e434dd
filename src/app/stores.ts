// Storage of one service process: Postgres (or the embedded PGlite), migrations, Redis and the
// invalidation bus when REDIS_URL is set, and the cached store the domain reads through.
import type { Redis } from 'ioredis';
import type { Config } from '../config/config.js';
import type { Logger } from '../adapters/telemetry/logger.js';
import type { Metrics } from '../adapters/telemetry/metrics.js';
import { connectPostgres, PostgresStore } from '../adapters/postgres/postgres-store.js';
import { migrate } from '../adapters/postgres/migrate.js';
import { PrimaryProbe } from '../adapters/postgres/primary-probe.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../adapters/postgres/embedded/pglite-server.js';
import { connectRedis } from '../adapters/cache/redis.js';
import { LocalBus, RedisBus } from '../adapters/cache/invalidation-bus.js';
import type { InvalidationBus } from '../core/ports/invalidation.js';
import { CachedStore } from '../adapters/cache/cached-store.js';
import type { Cleanups } from './cleanups.js';
import { withDeadline } from './deadline.js';

/** Bound on the start-up check of the primary: the first connection (or PGlite loading) may take a while. */
const STARTUP_CHECK_MS = 60_000;

export interface Stores {
  /** The Postgres URL in use (the embedded server's when DATABASE_URL is unset). */
  databaseUrl: string;
  embedded: boolean;
  sql: ReturnType<typeof connectPostgres>;
  postgres: PostgresStore;
  /** Which server the pool writes to, and whether it takes writes (for /readyz and /metrics). */
  primary: PrimaryProbe;
  redis: Redis | undefined;
  bus: InvalidationBus;
  store: CachedStore;
}

/** Starts the embedded Postgres when no DATABASE_URL is set (only one process may own DATA_DIR). */
export async function startDatabase(config: Config): Promise<{ url: string; embedded?: EmbeddedPostgres }> {
  if (config.databaseUrl) return { url: config.databaseUrl };
  const embedded = await startEmbeddedPostgres(config.dataDir);
  return { url: embedded.url, embedded };
}

export async function startStores(config: Config, logger: Logger, metrics: Metrics, cleanups: Cleanups): Promise<Stores> {
  const database = await startDatabase(config);
  if (database.embedded) cleanups.add(() => database.embedded!.stop());
  const embedded = !config.databaseUrl;
  const sql = connectPostgres({ url: database.url, poolSize: embedded ? 1 : config.databasePoolSize, timeoutMs: config.storeTimeoutMs, embedded });
  const postgres = new PostgresStore(sql, { timeoutMs: config.storeTimeoutMs, onHealth: (up) => metrics.setStoreUp('postgres', up) });
  cleanups.add(() => postgres.close());
  const primary = new PrimaryProbe(sql, { url: database.url, timeoutMs: config.storeTimeoutMs, embedded, registry: metrics.registry });
  // Migrations (and then key management) only on a writable primary; say which setting to look at.
  const state = await primary.check(Math.max(config.storeTimeoutMs, STARTUP_CHECK_MS));
  if (!state.writable) {
    throw new Error(`DATABASE_URL: no writable primary among its hosts (${state.server === 'none' ? '' : `${state.server}: `}${state.reason})`);
  }
  logger.info({ server: state.server }, 'postgres primary');
  const applied = await migrate(sql);
  if (applied.length > 0) logger.info({ migrations: applied }, 'database migrated');
  metrics.setStoreUp('postgres', true);

  let redis: Redis | undefined;
  let bus: InvalidationBus = new LocalBus();
  if (config.redisUrl) {
    const connected = connectRedis(config.redisUrl, Math.min(config.storeTimeoutMs, 500), (up) => metrics.setStoreUp('redis', up));
    const subscriber = connectRedis(config.redisUrl, Math.min(config.storeTimeoutMs, 500));
    redis = connected;
    bus = new RedisBus(connected, subscriber, `${config.redisKeyPrefix}invalidate`);
    cleanups.add(() => {
      connected.disconnect();
      subscriber.disconnect();
    });
    await waitForRedis(connected, config.storeTimeoutMs, logger);
  }

  const store = new CachedStore(postgres, {
    redis,
    keyPrefix: `${config.redisKeyPrefix}c:`,
    redisTtlSeconds: config.cacheTtlSeconds,
    localTtlMs: config.localCacheTtlMs,
    localMaxEntries: config.localCacheMaxEntries,
    bus,
    metrics,
  });
  return { databaseUrl: database.url, embedded, sql, postgres, primary, redis, bus, store };
}

/** Redis being down at start is not fatal (the service degrades to Postgres), but give it a moment. */
async function waitForRedis(redis: Redis, timeoutMs: number, logger: Logger): Promise<void> {
  if (redis.status === 'ready') return;
  const ok = await withDeadline(new Promise<boolean>((resolve) => redis.once('ready', () => resolve(true))), timeoutMs);
  if (!ok) logger.warn('Redis not reachable at start; serving from Postgres and in-process limits until it returns');
}
