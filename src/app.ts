// Composition root of one service process: stores, caches, pools, domain services and the two HTTP
// listeners (public and internal), wired from the validated configuration.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Redis } from 'ioredis';
import type { Config } from './config/config.js';
import type { Logger } from './log/logger.js';
import { Metrics } from './metrics/metrics.js';
import { CryptoPools } from './crypto/pools.js';
import { Limiters } from './ratelimit/limiters.js';
import { Argon2Share } from './ratelimit/argon2-share.js';
import { AdminAuthLimiter } from './ratelimit/admin-auth-limiter.js';
import { connectPostgres, PostgresStore } from './storage/postgres/postgres-store.js';
import { migrate } from './storage/postgres/migrate.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './storage/embedded/pglite-server.js';
import { connectRedis } from './storage/cache/redis.js';
import { LocalBus, RedisBus, type InvalidationBus } from './storage/cache/invalidation-bus.js';
import { CachedStore } from './storage/cache/cached-store.js';
import { VerifiedCredentials } from './domain/credentials/verified-cache.js';
import { Authenticator } from './domain/credentials/authenticator.js';
import { KeyManager } from './domain/keys/key-manager.js';
import { loadOrCreateKeyEncryptionKey } from './domain/keys/key-encryption.js';
import { TokenService } from './domain/tokens/token-service.js';
import { PlatformService } from './domain/platforms/platform-service.js';
import { AgentService } from './domain/agents/agent-service.js';
import { HttpServer } from './http/server.js';
import { NO_PROXY, parseProxyList } from './http/client-address.js';
import { publicRoutes } from './http/public-routes.js';
import { adminRoutes } from './http/admin-routes.js';
import { opsRoutes } from './http/ops-routes.js';
import { buildOpenApiDocument } from './openapi/document.js';
import { PostgresRevocationStore } from './storage/postgres/revocation-store.js';
import { RevocationService } from './domain/revocation/revocation-service.js';
import { RevocationMetrics } from './metrics/revocation-metrics.js';
import { attachRevocationSockets, revocationRoutes } from './http/revocation-routes.js';
import { startAudit } from './audit/start.js';
import { auditEvents, SCHEDULER_ACTOR } from './domain/audit/events.js';

export const MAX_BODY_BYTES = 16 * 1024;

export interface RunningApp {
  publicPort: number;
  adminPort: number;
  adminTokenPath?: string;
  /** Graceful stop: not ready at once, stop accepting, finish in-flight work, close everything. */
  shutdown(): Promise<void>;
}

export interface AppOptions {
  config: Config;
  logger: Logger;
  /** Cluster workers pass a collector that answers /metrics with the sum over every process. */
  metricsText?: (local: Metrics) => () => Promise<{ contentType: string; body: string }>;
}

/** ADMIN_TOKEN, or the one in DATA_DIR/admin-token, or a new one written there with mode 0600. */
export function resolveAdminToken(config: Config): { token: string; path?: string } {
  if (config.adminToken) return { token: config.adminToken };
  const file = path.join(config.dataDir, 'admin-token');
  if (existsSync(file)) return { token: readFileSync(file, 'utf8').trim(), path: file };
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  try {
    writeFileSync(file, randomBytes(32).toString('base64url') + '\n', { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error; // another process won the race
  }
  return { token: readFileSync(file, 'utf8').trim(), path: file };
}

/** Starts the embedded Postgres when no DATABASE_URL is set (only one process may own DATA_DIR). */
export async function startDatabase(config: Config): Promise<{ url: string; embedded?: EmbeddedPostgres }> {
  if (config.databaseUrl) return { url: config.databaseUrl };
  const embedded = await startEmbeddedPostgres(config.dataDir);
  return { url: embedded.url, embedded };
}

export async function startApp(options: AppOptions): Promise<RunningApp> {
  const { config, logger } = options;
  const metrics = new Metrics();
  const cleanups: (() => Promise<unknown> | unknown)[] = [];
  let shuttingDown = false;

  try {
    const database = await startDatabase(config);
    if (database.embedded) cleanups.push(() => database.embedded!.stop());
    const embedded = !config.databaseUrl;
    const sql = connectPostgres({
      url: database.url,
      poolSize: embedded ? 1 : config.databasePoolSize,
      timeoutMs: config.storeTimeoutMs,
    });
    const postgresStore = new PostgresStore(sql, { timeoutMs: config.storeTimeoutMs, onHealth: (up) => metrics.setStoreUp('postgres', up) });
    cleanups.push(() => postgresStore.close());
    const applied = await migrate(sql);
    if (applied.length > 0) logger.info({ migrations: applied }, 'database migrated');
    metrics.setStoreUp('postgres', true);

    let redis: Redis | undefined;
    let bus: InvalidationBus = new LocalBus();
    if (config.redisUrl) {
      redis = connectRedis(config.redisUrl, Math.min(config.storeTimeoutMs, 500), (up) => metrics.setStoreUp('redis', up));
      const subscriber = connectRedis(config.redisUrl, Math.min(config.storeTimeoutMs, 500));
      bus = new RedisBus(redis, subscriber, `${config.redisKeyPrefix}invalidate`);
      cleanups.push(() => {
        redis!.disconnect();
        subscriber.disconnect();
      });
      await waitForRedis(redis, config.storeTimeoutMs, logger);
    }

    const store = new CachedStore(postgresStore, {
      redis,
      keyPrefix: `${config.redisKeyPrefix}c:`,
      redisTtlSeconds: config.cacheTtlSeconds,
      localTtlMs: config.localCacheTtlMs,
      localMaxEntries: config.localCacheMaxEntries,
      bus,
      metrics,
    });

    const pools = new CryptoPools(config, metrics);
    cleanups.push(() => pools.close());
    const limiters = new Limiters(
      {
        redis,
        keyPrefix: config.redisKeyPrefix,
        tokenPoints: config.rateLimitTokenPoints,
        tokenWindowSeconds: config.rateLimitTokenWindowSeconds,
        authFailPoints: config.rateLimitAuthFailPoints,
        authFailWindowSeconds: config.rateLimitAuthFailWindowSeconds,
      },
      (limiter) => metrics.rateLimited(limiter),
    );

    const { kek, generatedPath } = loadOrCreateKeyEncryptionKey(config.keyEncryptionKey, config.dataDir);
    if (generatedPath) logger.warn({ path: generatedPath }, 'KEY_ENCRYPTION_KEY unset: generated a key-encryption key in DATA_DIR');
    const keys = new KeyManager(
      store,
      bus,
      {
        kek,
        tokenTtlSeconds: config.tokenTtlSeconds,
        clockSkewSeconds: config.keyClockSkewSeconds,
        propagationSeconds: config.keyPropagationSeconds,
        rotationIntervalSeconds: config.keyRotationIntervalSeconds,
        refreshSeconds: config.keyRefreshSeconds,
      },
      (error) => logger.warn({ err: { message: (error as Error).message } }, 'signing key refresh failed'),
    );
    await keys.start();
    cleanups.push(() => keys.stop());
    metrics.registerKeyInfo(() => keys.keyInfo());

    const verified = new VerifiedCredentials(config.verifiedCacheMaxEntries, config.verifiedCacheTtlSeconds * 1000);
    const share = new Argon2Share(config.argon2MaxPerAddress, () => metrics.rateLimited('argon2_share_per_address'));
    const authenticator = new Authenticator(store, pools, limiters, verified, metrics, share, bus);
    await authenticator.init();
    const audit = await startAudit({ config: config.audit, databaseUrl: database.url, embedded, readTimeoutMs: config.storeTimeoutMs, dataDir: config.dataDir, logger, metrics });
    cleanups.push(() => audit.close());
    keys.onScheduledRotation = (kid) =>
      audit.sink.emit(auditEvents.adminChange('key.rotated', { actor: SCHEDULER_ACTOR, clientAddress: '', kid, status: 'next' }));
    const tokens = new TokenService(
      authenticator,
      limiters,
      keys,
      pools,
      { issuer: config.issuer, tokenTtlSeconds: config.tokenTtlSeconds },
      audit.sink,
    );
    const revocationMetrics = new RevocationMetrics(metrics.registry);
    const revocations = new RevocationService(
      new PostgresRevocationStore(sql, config.storeTimeoutMs),
      keys,
      bus,
      {
        issuer: config.issuer,
        tokenTtlSeconds: config.tokenTtlSeconds,
        clockSkewSeconds: config.keyClockSkewSeconds,
        issuedSlackSeconds: config.revocationIssuedSlackSeconds,
        pollMs: config.revocationPollMs,
        documentReuseMs: 1000,
      },
      revocationMetrics,
      (error) => logger.warn({ err: { message: (error as Error).message } }, 'revocation feed push failed'),
    );
    keys.revocations = revocations;
    const platforms = new PlatformService(store, config.enrichmentTimeoutMs, revocations);
    const agents = new AgentService(store, pools, config.apiKeyPrefix, revocations);

    const openApiBody = Buffer.from(
      JSON.stringify(buildOpenApiDocument({ apiKeyPrefix: config.apiKeyPrefix, serverUrl: config.publicBaseUrl, version: '1.0.0' })),
    );
    const admin = resolveAdminToken(config);

    const serverOptions = { maxBodyBytes: MAX_BODY_BYTES, metrics, logger, accessLog: config.accessLog };
    const publicServer = new HttpServer(
      [
        ...publicRoutes({ apiKeyPrefix: config.apiKeyPrefix, tokens, authenticator, platforms, keys, metrics, openApi: () => openApiBody, audit: audit.sink }),
        ...revocationRoutes(revocations),
      ],
      { ...serverOptions, name: 'public', proxy: { hops: config.trustProxyHops, proxies: parseProxyList(config.trustProxyCidrs).proxies } },
    );
    const adminAuthLimiter = new AdminAuthLimiter(
      { redis, keyPrefix: config.redisKeyPrefix, points: config.adminAuthFailPoints, windowSeconds: config.adminAuthFailWindowSeconds },
      () => metrics.rateLimited('admin_auth_fail_per_address'),
    );
    const onAdminAuthFailure = (address: string) => {
      metrics.adminAuthFailed();
      logger.warn({ address }, 'admin request with a missing or wrong bearer token');
    };

    const stopSockets = attachRevocationSockets(publicServer.app, revocations, revocationMetrics, {
      heartbeatMs: config.revocationHeartbeatSeconds * 1000,
      logger,
    });
    revocations.start();
    cleanups.push(() => {
      stopSockets();
      revocations.stop();
    });

    const ready = async () => {
      const [postgresUp, redisUp, poolsUp] = await Promise.all([
        postgresStore.ping().then(() => true, () => false),
        redis ? withDeadline(redis.ping().then(() => true, () => false), 1000) : Promise.resolve(true),
        pools.ping(1000),
      ]);
      metrics.setStoreUp('postgres', postgresUp);
      if (redis) metrics.setStoreUp('redis', redisUp);
      let signingKey = true;
      try {
        keys.activeKey();
      } catch {
        signingKey = false;
      }
      // Redis is an accelerator, not a dependency: without it tokens still come from Postgres with an
      // in-process limiter, so a Redis outage must not pull every pod out of the load balancer.
      const isReady = !shuttingDown && postgresUp && poolsUp && signingKey;
      metrics.setReady(isReady);
      return { ready: isReady, checks: { postgres: postgresUp, redis: redis ? redisUp : 'not configured', worker_pools: poolsUp, signing_key: signingKey, shutting_down: shuttingDown } };
    };
    const metricsText = options.metricsText
      ? options.metricsText(metrics)
      : async () => ({ contentType: metrics.registry.contentType, body: await metrics.registry.metrics() });
    const adminServer = new HttpServer(
      [
        ...opsRoutes({ ready, metrics: metricsText }),
        ...adminRoutes({
          adminToken: admin.token,
          authLimiter: adminAuthLimiter,
          onAuthFailure: onAdminAuthFailure,
          platforms,
          agents,
          keys,
          audit: audit.sink,
          auditStore: audit.store,
        }),
      ],
      // The internal port has no proxy in front of it (never route ace-internal through an Ingress):
      // X-Forwarded-For there is the caller's own text, so the socket address counts.
      { ...serverOptions, name: 'admin', accessLog: false, readsAuthorization: true, proxy: NO_PROXY },
    );

    const publicPort = await publicServer.listen(config.host, config.port);
    const adminPort = await adminServer.listen(config.adminHost, config.adminPort);
    metrics.setReady(true);

    return {
      publicPort,
      adminPort,
      adminTokenPath: admin.path,
      async shutdown() {
        if (shuttingDown) return;
        shuttingDown = true;
        metrics.setReady(false);
        publicServer.stopAccepting();
        await publicServer.idle(config.shutdownTimeoutMs);
        publicServer.closeAll();
        adminServer.closeAll();
        await runCleanups(cleanups, logger);
      },
    };
  } catch (error) {
    await runCleanups(cleanups, logger);
    throw error;
  }
}

async function runCleanups(cleanups: (() => Promise<unknown> | unknown)[], logger: Logger): Promise<void> {
  for (const cleanup of cleanups.reverse()) {
    try {
      await cleanup();
    } catch (error) {
      logger.warn({ err: { message: (error as Error).message } }, 'cleanup step failed');
    }
  }
}

function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T | false> {
  return Promise.race([promise, new Promise<false>((resolve) => setTimeout(() => resolve(false), ms).unref())]);
}

/** Redis being down at start is not fatal (the service degrades to Postgres), but give it a moment. */
async function waitForRedis(redis: Redis, timeoutMs: number, logger: Logger): Promise<void> {
  if (redis.status === 'ready') return;
  const ok = await withDeadline(new Promise<boolean>((resolve) => redis.once('ready', () => resolve(true))), timeoutMs);
  if (!ok) logger.warn('Redis not reachable at start; serving from Postgres and in-process limits until it returns');
}
