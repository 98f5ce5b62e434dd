// The two listeners of one process: the public port (token, listing, JWKS, scope files, revocation
// feed) and the internal port (admin API, readiness, metrics), with the readiness check.
import type { Config } from '../config/config.js';
import type { Logger } from '../adapters/telemetry/logger.js';
import type { DegradedComponent } from '../adapters/telemetry/index.js';
import { DegradationLog, type NotReadyBecause } from './degradation-log.js';
import type { AppMetrics } from './metrics.js';
import { AdminAuthLimiter } from '../adapters/ratelimit/admin-auth-limiter.js';
import { HttpServer } from '../adapters/http/server.js';
import { MAX_BODY_BYTES, type Route } from '../adapters/http/types.js';
import { NO_PROXY, parseProxyList, PRIVATE_RANGES } from '../support/client-address.js';
import { publicRoutes } from '../adapters/http/public-routes.js';
import { oauthRoutes } from '../adapters/http/oauth-routes.js';
import { adminBearerGuard, adminRoutes } from '../adapters/http/routes/admin/index.js';
import { opsRoutes } from '../adapters/http/ops-routes.js';
import * as uWS from 'uWebSockets.js';
import { revocationPollRoutes } from '../adapters/http/routes/revocation-poll.js';
import { attachRevocationSockets, revocationSocketRoute } from '../adapters/http/routes/revocation-socket.js';
import { ssfRoutes } from '../adapters/http/routes/ssf.js';
import { RevocationTransmitter } from '../core/revocation/transmitter.js';
import { SocketTopics } from '../adapters/http/routes/revocation-topics.js';
import { UncheckedRefusals } from '../adapters/http/token-door.js';
import { ResourceIndex } from '../core/platforms/resource-index.js';
import { publicApiDocument } from '../adapters/http/openapi/api-documents.js';
import type { Stores } from './stores.js';
import type { Domain } from './domain.js';
import type { Cleanups } from './cleanups.js';
import { withDeadline } from '../core/support/deadline.js';

/** A platform's revocation stream is re-read from the log at most once a second (bus notices sooner). */
const FEED_STREAM_REUSE_MS = 1000;

export interface Servers {
  public: HttpServer;
  admin: HttpServer;
}

/** What the listeners use of the stores and the domain (tests in process pass memory ports: test/support/in-process.ts). */
export type ServedStores = Pick<Stores, 'redis' | 'redisStatus' | 'bus'> & { primary: Pick<Stores['primary'], 'check'>; store: Pick<Stores['store'], 'redisCacheTrusted'> };
export type ServedDomain = Omit<Domain, 'pools' | 'limiters' | 'revocations'> & { pools: Pick<Domain['pools'], 'ping' | 'signToken'> };

export interface ServerContext {
  config: Config;
  logger: Logger;
  metrics: AppMetrics;
  stores: ServedStores;
  domain: ServedDomain;
  adminToken: string;
  /** /metrics body (cluster workers answer with the sum over every process). */
  metricsText: () => Promise<{ contentType: string; body: string }>;
  shuttingDown: () => boolean;
}

export function createServers(context: ServerContext, cleanups: Cleanups): Servers {
  const { config, logger, metrics, stores, domain } = context;
  const { tokens, authenticator, platforms, scopeFiles, keys, audit, agents } = domain;
  // Token refusals before any credential check: counted, one log line per window (the core records the others).
  const unchecked = new UncheckedRefusals({
    windowSeconds: config.audit.refusalWindowSeconds,
    log: ({ byCode, exampleAddress, windowSeconds }) =>
      logger.warn({ refused: byCode, example_address: exampleAddress, window_seconds: windowSeconds }, 'token requests refused before any credential check (counted in ace_tokens_issued_total, not recorded in the audit trail)'),
  });
  cleanups.add(() => unchecked.close());
  const serverOptions = { maxBodyBytes: MAX_BODY_BYTES, metrics: metrics.http, logger, accessLog: config.accessLog };

  // The public listener's uWS app first: the transmitter pushes on its topics, and its poll route is served by it.
  const publicApp = uWS.App();
  const topics = new SocketTopics({ app: publicApp });
  const transmitter = new RevocationTransmitter({
    log: domain.revocationLog,
    keys,
    signer: domain.pools,
    bus: stores.bus,
    transport: topics,
    metrics: metrics.revocation,
    onError: domain.backgroundFailure,
    issuer: config.issuer,
    pollMs: config.revocationPollMs,
    documentReuseMs: FEED_STREAM_REUSE_MS,
    heartbeatMs: config.revocationHeartbeatSeconds * 1000,
  });
  const publicRouteList: Route[] = [
    ...publicRoutes({ apiKeyPrefix: config.apiKeyPrefix, tokens, authenticator, platforms, scopeFiles, keys, metrics: metrics.http, openApi: () => openApiBody, audit: audit.sink, unchecked }),
    ...oauthRoutes({ apiKeyPrefix: config.apiKeyPrefix, issuer: config.issuer, publicBaseUrl: config.publicBaseUrl, tokens, resources: new ResourceIndex({ platforms }), metrics: metrics.http, unchecked }),
    ...revocationPollRoutes({ transmitter, feedCredentials: domain.feedCredentials, metrics: metrics.revocation, registry: metrics.registry }),
    ...ssfRoutes({ issuer: config.issuer, publicBaseUrl: config.publicBaseUrl }),
  ];
  // Generated from the routes this listener serves (and the WebSocket beside them).
  const openApiBody: Buffer = Buffer.from(JSON.stringify(publicApiDocument({ routes: [...publicRouteList, revocationSocketRoute], serverUrl: config.publicBaseUrl })));
  const publicServer = new HttpServer({
    ...serverOptions,
    routes: publicRouteList,
    name: 'public',
    mayBeProxied: true,
    proxy: {
      hops: config.trustProxyHops,
      proxies: parseProxyList(config.trustProxyCidrs).proxies,
      peers: parseProxyList(config.trustProxyPeers || PRIVATE_RANGES).proxies,
    },
    app: publicApp,
  });
  const stopSockets = attachRevocationSockets(publicServer.app, topics, transmitter, metrics.revocation, {
    logger,
    feedCredentials: domain.feedCredentials,
    addressOf: (res, req) => publicServer.clientAddressOf(res, req),
    maxPerAddress: config.revocationWsMaxPerAddress,
    maxTotal: config.revocationWsMax,
  });
  transmitter.start();
  cleanups.add(() => {
    stopSockets();
    transmitter.stop();
  });

  const authLimiter = new AdminAuthLimiter({
    redis: stores.redis,
    keyPrefix: config.redisKeyPrefix,
    points: config.adminAuthFailPoints,
    windowSeconds: config.adminAuthFailWindowSeconds,
    onStoreFailure: (operation) => metrics.cache.redisFailed(operation),
    onRefusal: () => metrics.rateLimits.rateLimited('admin_auth_fail_per_address'),
  });
  const onAuthFailure = (address: string) => {
    metrics.http.adminAuthFailed();
    logger.warn({ address }, 'admin request with a missing or wrong bearer token');
  };
  const adminServer = new HttpServer({
    ...serverOptions,
    routes: [
      ...opsRoutes({ ready: selfCheckedReadiness(context, cleanups), metrics: context.metricsText }),
      ...adminRoutes({ platforms, agents, clientKeys: domain.clientKeys, keys, feedCredentials: domain.feedCredentials, audit: audit.sink, auditStore: audit.store }),
    ],
    name: 'admin',
    accessLog: false,
    // The internal port has no proxy in front of it (never route ace-internal through an Ingress):
    // X-Forwarded-For there is the caller's own text, so the socket address counts.
    proxy: NO_PROXY,
    guards: { admin_bearer: adminBearerGuard({ adminToken: context.adminToken, authLimiter, onAuthFailure, audit: audit.sink }) },
  });
  return { public: publicServer, admin: adminServer };
}

/**
 * How often each process evaluates its readiness on its own: ace_ready and ace_store_up must move with
 * an outage even when nothing asks /readyz, or Prometheus keeps reading 1 through it.
 * One check is a Postgres primary check (one SELECT), a Redis PING and a no-op task per worker pool.
 */
const READINESS_EVERY_MS = 1000;

/**
 * The readiness check, also run on a timer. One evaluation at a time: a probe that arrives while the
 * timer's check runs shares its answer, so probes and the timer never pile up pings.
 */
function selfCheckedReadiness(context: ServerContext, cleanups: Cleanups): () => ReturnType<typeof readiness> {
  let inFlight: ReturnType<typeof readiness> | undefined;
  const degradation = new DegradationLog({ logger: context.logger });
  const check = () =>
    (inFlight ??= readiness(context, degradation).finally(() => {
      inFlight = undefined;
    }));
  const timer = setInterval(() => {
    check().catch((error: Error) => context.logger.warn({ err: { message: error.message } }, 'readiness check failed'));
  }, READINESS_EVERY_MS);
  timer.unref();
  cleanups.add(() => clearInterval(timer));
  return check;
}

/**
 * /readyz means "can serve": a signing key, answering worker pools, and something to read agents from —
 * the Postgres primary or, while it is away, the Redis cache if this process trusts it (a pod that issues
 * tokens to its warm agents stays in rotation, degraded). Not ready while draining, without any of those, while its clock is too far from the database's to issue, or before the Redis it was
 * told to use was reached once. Without Redis, the in-process cache lasts LOCAL_CACHE_TTL_MS only: Postgres
 * away then means not ready.
 */
async function readiness({ stores, domain, metrics, shuttingDown }: ServerContext, degradation: DegradationLog) {
  const { redisStatus } = stores;
  const [postgres, redis, poolsUp] = await Promise.all([
    stores.primary.check(),
    redisStatus ? withDeadline(redisStatus.check(), 1000) : Promise.resolve(undefined),
    domain.pools.ping(1000),
  ]);
  // Up means writable: a standby or a read-only server is degraded (tokens yes, admin writes no).
  const postgresUp = postgres.writable;
  const redisUp = redis ? redis.up : false; // no answer within the bound: down
  metrics.health.setStoreUp('postgres', postgresUp);
  if (redisStatus) metrics.health.setStoreUp('redis', redisUp);
  let signingKey = true;
  try {
    domain.keys.activeKey();
  } catch {
    signingKey = false;
  }
  // Redis is an accelerator, not a dependency: without it tokens still come from Postgres with an
  // in-process limiter, so a Redis outage must not pull every pod out of the load balancer. But a process
  // that has never reached (and verified) the Redis it was told to use is not ready (stores.ts).
  const draining = shuttingDown();
  const redisBlocks = redisStatus !== undefined && (redis ? redis.blocksReadiness : !redisStatus.verifiedOnce);
  // Without Postgres, agents come from the Redis cache, which is read only while trusted (cached-store.ts).
  const canReadAgents = postgresUp || (redisStatus !== undefined && redisUp && stores.store.redisCacheTrusted);
  // A clock beyond the bound refuses every token (token-service.ts): such a pod has nothing to serve.
  const clockRefusal = domain.clock.refusal();
  const ready = !draining && canReadAgents && poolsUp && signingKey && !redisBlocks && clockRefusal === undefined;
  const down: DegradedComponent[] = [...(postgresUp ? [] : ['postgres' as const]), ...(redisStatus && !redisUp ? ['redis' as const] : [])];
  metrics.health.setReady(ready);
  metrics.health.setDegraded('postgres', ready && !postgresUp);
  metrics.health.setDegraded('redis', ready && redisStatus !== undefined && !redisUp);
  const because: NotReadyBecause[] = [...(poolsUp ? [] : ['worker_pools' as const]), ...(signingKey ? [] : ['signing_key' as const]), ...(redisBlocks ? ['redis_never_reached' as const] : []), ...(clockRefusal === undefined ? [] : ['clock_skew' as const])];
  if (!draining) degradation.report(down, ready, because);
  return {
    ready,
    checks: {
      postgres: postgresUp,
      postgres_primary: postgres.server,
      redis: redisStatus ? redisUp : 'not configured',
      ...(redisStatus
        ? {
            redis_topology: redis
              ? { ...redis.detail, cache: stores.store.redisCacheTrusted ? 'in use' : 'bypassed until swept' }
              : { topology: redisStatus.topology.kind, problem: 'no answer within 1 s' },
          }
        : {}),
      worker_pools: poolsUp,
      signing_key: signingKey,
      clock_skew: clockRefusal ?? false,
      shutting_down: draining,
      degraded: ready && down.length > 0 ? down.join(',') : false,
    },
  };
}
