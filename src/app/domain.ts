// The composition root of one process's services: the concrete adapters (crypto pools, rate limiters,
// key material, the audit trail, the revocation log and feed) built and handed to the core's services as
// one typed object of ports each. Nothing is assigned after construction.
import type { Config } from '../config/config.js';
import type { Logger } from '../adapters/telemetry/logger.js';
import type { AppMetrics } from './metrics.js';
import { declareKeyMetrics } from '../adapters/telemetry/key-metrics.js';
import { CryptoPools } from '../adapters/crypto/pools.js';
import { RsaKeyMaterial } from '../adapters/crypto/key-material.js';
import { deriveKey, loadOrCreateKeyEncryptionKey } from '../adapters/crypto/key-encryption.js';
import { RedisVerifiedMemory } from '../adapters/cache/verified-memory.js';
import { Limiters } from '../adapters/ratelimit/limiters.js';
import { PostgresRevocationStore } from '../adapters/postgres/revocation-store.js';
import type { RevocationStore } from '../core/ports/revocation-log.js';
import type { UnitOfWork } from '../core/ports/unit-of-work.js';
import { PostgresUnitOfWork } from '../adapters/postgres/unit-of-work.js';
import { ClockSkewMonitor } from '../adapters/postgres/clock-skew.js';
import type { IssuingClock } from '../core/ports/clock.js';
import { PostgresFeedCredentialStore } from '../adapters/postgres/feed-credential-store.js';
import { FeedCredentialService } from '../core/revocation/feed-credential-service.js';
import { ScopeFiles } from '../adapters/http/scope-file.js';
import { Argon2Share } from '../core/credentials/argon2-share.js';
import { VerifiedCredentials } from '../core/credentials/verified-cache.js';
import { Authenticator } from '../core/credentials/authenticator.js';
import { KeyManager } from '../core/keys/key-manager.js';
import { TokenService } from '../core/tokens/token-service.js';
import { PlatformService } from '../core/platforms/platform-service.js';
import { AgentService } from '../core/agents/agent-service.js';
import { RevocationService } from '../core/revocation/revocation-service.js';
import { ClientKeyIndex } from '../core/credentials/client-key-index.js';
import { AssertionAuthenticator } from '../core/credentials/assertion-authenticator.js';
import { ClientKeyService } from '../core/agents/client-key-service.js';
import { PostgresClientKeyStore } from '../adapters/postgres/client-key-store.js';
import { decoyKeys, JoseAssertionVerifier } from '../adapters/crypto/assertion-verifier.js';
import { RedisReplayGuard } from '../adapters/cache/replay-guard.js';
import { PostgresReplayGuard } from '../adapters/postgres/used-jtis.js';
import { EitherRecordReplayGuard } from '../core/credentials/replay-record.js';
import { startAudit, type RunningAudit } from './audit.js';
import { PostgresClusterVersions } from '../adapters/postgres/cluster-versions.js';
import type { Stores } from './stores.js';
import type { Cleanups } from './cleanups.js';

/** How often each process deletes the used jtis no assertion can still need (one DELETE on an index). */
const USED_JTI_PRUNE_EVERY_MS = 60_000;
/** How often each process reads the database's clock (one SELECT). */
const CLOCK_CHECK_EVERY_MS = 5000;
/** Bound on the worker threads' first module load at start-up (a cold image on a contended node). */
const WORKER_LOAD_TIMEOUT_MS = 60_000;

export interface Domain {
  pools: CryptoPools;
  limiters: Limiters;
  keys: KeyManager;
  authenticator: Authenticator;
  audit: RunningAudit;
  tokens: TokenService;
  revocations: RevocationService;
  /** The revocation log the feed's transmitter serves (made with the public listener's transport, servers.ts). */
  revocationLog: RevocationStore;
  /** Background work that failed (counted and logged). */
  backgroundFailure: (what: 'revocation_push' | 'revocation_purge', error: unknown) => void;
  feedCredentials: FeedCredentialService;
  platforms: PlatformService;
  scopeFiles: ScopeFiles;
  agents: AgentService;
  clientKeys: ClientKeyService;
  /** Whether this instance's clock may stamp tokens: /readyz is not ready while it may not. */
  clock: IssuingClock;
}

/** What every part of the wiring reads: the settings, the log, the series, the stores and the cleanups. */
interface Wiring {
  config: Config;
  logger: Logger;
  metrics: AppMetrics;
  stores: Stores;
  cleanups: Cleanups;
}

/**
 * The services in the order they start (each part below wires one feature): the worker pools and the
 * limiters, the audit trail, the admin changes with the revocation log, the signing keys, the secret and
 * assertion checks, the clock check, the token exchange, and the admin-side services.
 */
export async function startDomain(config: Config, logger: Logger, metrics: AppMetrics, stores: Stores, cleanups: Cleanups): Promise<Domain> {
  const wiring: Wiring = { config, logger, metrics, stores, cleanups };
  const { telemetry } = metrics;
  const { pools, limiters } = await startPoolsAndLimits(wiring);

  const audit = await startAudit({
    config: config.audit,
    databaseUrl: stores.databaseUrl,
    embedded: stores.embedded,
    readTimeoutMs: config.storeTimeoutMs,
    dataDir: config.dataDir,
    logger,
    metrics: metrics.audit,
  });
  cleanups.add(() => audit.close());

  const { revocationLog, uow, revocations } = adminChanges(wiring);
  const { kek, keys } = await startKeys(wiring, { uow, revocations, audit });
  const authenticator = await startSecretChecks(wiring, { kek, pools, limiters });
  const { clientKeyStore, assertionVerifier, assertions } = await startAssertionChecks(wiring, { limiters });
  const clock = await startClockCheck(wiring);
  const tokens = new TokenService({
    authenticator,
    assertions,
    limits: limiters,
    keys,
    signer: pools,
    audit: audit.sink,
    issuer: config.issuer,
    tokenTtlSeconds: config.tokenTtlSeconds,
    clock,
  });

  const { feedCredentials, platforms, agents, clientKeys } = adminServices(wiring, { uow, revocations, pools, clientKeyStore, assertionVerifier });
  return {
    pools,
    limiters,
    keys,
    authenticator,
    audit,
    tokens,
    revocations,
    revocationLog,
    backgroundFailure: (what, error) => telemetry.record({ type: 'background_failure', what, error }),
    feedCredentials,
    platforms,
    scopeFiles: new ScopeFiles({ platforms }),
    agents,
    clientKeys,
    clock,
  };
}

/** The worker pools (argon2, signing), loaded before the first task with a deadline, and the rate limiters. */
async function startPoolsAndLimits({ config, metrics, stores: { redis }, cleanups }: Wiring) {
  const pools = new CryptoPools({
    argon2Threads: config.argon2Threads,
    argon2MaxQueue: config.argon2MaxQueue,
    argon2TaskTimeoutMs: config.argon2TaskTimeoutMs,
    signThreads: config.signThreads,
    signMaxQueue: config.signMaxQueue,
    signTaskTimeoutMs: config.signTaskTimeoutMs,
    warmupSeconds: config.warmupSeconds,
    warmupMaxWaitMs: config.warmupMaxWaitMs,
    metrics: metrics.pools,
    registry: metrics.registry,
  });
  cleanups.add(() => pools.close());
  // Before the first task with a deadline (the authenticator's decoy hash, the first signature).
  await pools.loadAll(WORKER_LOAD_TIMEOUT_MS);
  const limiters = new Limiters({
    redis,
    keyPrefix: config.redisKeyPrefix,
    tokenPoints: config.rateLimitTokenPoints,
    tokenWindowSeconds: config.rateLimitTokenWindowSeconds,
    tokenLease: config.rateLimitTokenLease,
    authFailPoints: config.rateLimitAuthFailPoints,
    authFailWindowSeconds: config.rateLimitAuthFailWindowSeconds,
    onStoreFailure: (operation) => metrics.cache.redisFailed(operation),
    onRefusal: (limiter) => metrics.rateLimits.rateLimited(limiter),
  });
  return { pools, limiters };
}

/** The admin changes' unit of work and the revocation log its changes append to. */
function adminChanges({ config, metrics: { telemetry }, stores, stores: { store, bus } }: Wiring) {
  const revocationLog = new PostgresRevocationStore({ sql: stores.sql, timeoutMs: config.storeTimeoutMs });
  // Admin changes: the write, its revocation entries and its audit event in one Postgres transaction;
  // cache drops and revocation notices after the commit.
  const uow = store.unitOfWork(
    new PostgresUnitOfWork({
      store: stores.postgres,
      recordAudit: config.audit.enabled,
      onEffectFailure: (error) => telemetry.record({ type: 'background_failure', what: 'admin_after_commit', error }),
    }),
  );
  const revocations = new RevocationService({
    bus,
    tokenTtlSeconds: config.tokenTtlSeconds,
    clockSkewSeconds: config.keyClockSkewSeconds,
    issuedSlackSeconds: config.revocationIssuedSlackSeconds,
  });
  return { revocationLog, uow, revocations };
}

/** The signing keys (encrypted at rest with the key-encryption key), started, with their series. */
async function startKeys(
  { config, logger, metrics, metrics: { telemetry }, stores: { store, bus }, cleanups }: Wiring,
  { uow, revocations, audit }: { uow: UnitOfWork; revocations: RevocationService; audit: RunningAudit },
) {
  const { kek, generatedPath } = loadOrCreateKeyEncryptionKey(config.keyEncryptionKey, config.dataDir);
  if (generatedPath) logger.warn({ path: generatedPath }, 'KEY_ENCRYPTION_KEY unset: generated a key-encryption key in DATA_DIR');
  const keys = new KeyManager({
    store,
    uow,
    bus,
    material: new RsaKeyMaterial({ kek }),
    revocations,
    audit: audit.sink,
    telemetry,
    tokenTtlSeconds: config.tokenTtlSeconds,
    clockSkewSeconds: config.keyClockSkewSeconds,
    propagationSeconds: config.keyPropagationSeconds,
    rotationIntervalSeconds: config.keyRotationIntervalSeconds,
    refreshSeconds: config.keyRefreshSeconds,
  });
  await keys.start();
  cleanups.add(() => keys.stop());
  declareKeyMetrics(metrics.registry, () => keys.keyInfo());
  return { kek, keys };
}

/** Agents with secrets: the authenticator, with the verified-secret memory shared through Redis when there is one. */
async function startSecretChecks(
  { config, metrics, metrics: { telemetry }, stores: { store, bus, redis } }: Wiring,
  { kek, pools, limiters }: { kek: Buffer; pools: CryptoPools; limiters: Limiters },
) {
  // Secrets verified by any instance, so a new pod or a restart costs no argon2 for warm agents.
  const shared = redis
    ? new RedisVerifiedMemory({
        redis,
        keyPrefix: `${config.redisKeyPrefix}v:`,
        hmacKey: deriveKey(kek, 'verified-secret memory v1'),
        ttlMs: config.verifiedCacheTtlSeconds * 1000,
        onFailure: (operation) => metrics.cache.redisFailed(operation),
      })
    : undefined;
  // No drop on invalidations: an entry names the hash it matched (a rotation voids it) and expires by itself.
  const authenticator = new Authenticator({
    shared,
    store,
    hasher: pools,
    limits: limiters,
    verified: new VerifiedCredentials({ maxEntries: config.verifiedCacheMaxEntries, ttlMs: config.verifiedCacheTtlSeconds * 1000 }),
    share: new Argon2Share({
      maxPerAddress: config.argon2MaxPerAddress,
      onRefusal: () => telemetry.record({ type: 'rate_limited', limiter: 'argon2_share_per_address' }),
    }),
    bus,
    telemetry,
  });
  await authenticator.init();
  return authenticator;
}

/** Agents without secrets: their keys in memory, the single use of each jti, the assertion authenticator. */
async function startAssertionChecks({ config, metrics: { telemetry }, stores, stores: { store, bus, redis }, cleanups }: Wiring, { limiters }: { limiters: Limiters }) {
  // Agents without secrets: client assertions checked at signature speed against keys held in memory.
  const clientKeyStore = new PostgresClientKeyStore({ sql: stores.sql, timeoutMs: config.storeTimeoutMs });
  const assertionVerifier = new JoseAssertionVerifier({
    allowLoopback: config.jwksUriAllowLoopback,
    allowPrivate: config.jwksUriAllowPrivate,
    timeoutMs: config.jwksUriTimeoutMs,
    jwksCacheSeconds: config.jwksUriCacheSeconds,
    jwksCooldownSeconds: config.jwksUriCooldownSeconds,
  });
  const clientKeyIndex = new ClientKeyIndex({ store: clientKeyStore, verifier: assertionVerifier, bus, telemetry });
  await clientKeyIndex.init();
  // Single use of each jti: Postgres is the durable record (every instance, any Redis loss), Redis the
  // record while Postgres is away; on the embedded default, PGlite alone (replay-record.ts).
  const usedJtis = new PostgresReplayGuard({ sql: stores.sql, timeoutMs: config.storeTimeoutMs });
  const replays = redis ? new EitherRecordReplayGuard({ durable: usedJtis, fast: new RedisReplayGuard({ redis, keyPrefix: `${config.redisKeyPrefix}jti:` }) }) : usedJtis;
  const pruneJtis = setInterval(() => {
    usedJtis.pruneExpired().catch((error) => telemetry.record({ type: 'background_failure', what: 'used_jti_prune', error }));
  }, USED_JTI_PRUNE_EVERY_MS);
  pruneJtis.unref();
  cleanups.add(() => clearInterval(pruneJtis));
  const assertions = new AssertionAuthenticator({
    index: clientKeyIndex,
    verifier: assertionVerifier,
    replays,
    store,
    limits: limiters,
    telemetry,
    audiences: [`${config.publicBaseUrl}/oauth2/token`, config.issuer],
    maxAssertionLifetimeSeconds: config.clientAssertionMaxLifetimeSeconds,
    maxWorkloadTokenLifetimeSeconds: config.workloadTokenMaxLifetimeSeconds,
    clockToleranceSeconds: config.clientAssertionClockToleranceSeconds,
    decoyKeys: await decoyKeys(),
  });
  return { clientKeyStore, assertionVerifier, assertions };
}

/** The database's clock against this instance's: tokens are refused while they differ too much. */
async function startClockCheck({ config, logger, metrics, metrics: { telemetry }, stores, cleanups }: Wiring) {
  const clock = new ClockSkewMonitor({
    sql: stores.sql,
    maxSeconds: config.clockSkewMaxSeconds,
    timeoutMs: config.storeTimeoutMs,
    registry: metrics.registry,
    onVerdict: (refusing, skewSeconds, reason) =>
      refusing
        ? logger.error({ skewSeconds, maxSeconds: config.clockSkewMaxSeconds }, `clock skew: refusing to issue tokens (503): ${reason}`)
        : logger.info({ skewSeconds }, 'clock skew back within CLOCK_SKEW_MAX_SECONDS: issuing tokens again'),
    onFailure: (error) => telemetry.record({ type: 'background_failure', what: 'clock_skew_check', error }),
  });
  await clock.check();
  clock.start(CLOCK_CHECK_EVERY_MS);
  cleanups.add(() => clock.stop());
  return clock;
}

/** The admin side's services: feed credentials, platforms, agents, client keys and workload identity. */
function adminServices(
  { config, metrics: { telemetry }, stores, stores: { store, bus } }: Wiring,
  deps: { uow: UnitOfWork; revocations: RevocationService; pools: CryptoPools; clientKeyStore: PostgresClientKeyStore; assertionVerifier: JoseAssertionVerifier },
) {
  const { uow, revocations, pools, clientKeyStore, assertionVerifier } = deps;
  // Who may read a platform's feed: the hashes of its feed tokens, held in memory and kept current by the bus.
  const feedCredentials = new FeedCredentialService({
    store: new PostgresFeedCredentialStore({ sql: stores.sql, timeoutMs: config.storeTimeoutMs }),
    uow,
    bus,
    onError: (error) => telemetry.record({ type: 'background_failure', what: 'feed_credentials_reload', error }),
  });
  const platforms = new PlatformService({ store, uow, revocations, enrichmentTimeoutMs: config.enrichmentTimeoutMs, telemetry });
  const agents = new AgentService({ store, uow, hasher: pools, revocations, apiKeyPrefix: config.apiKeyPrefix });
  // Embedded: one instance per data folder, no older release beside it.
  const cluster = stores.embedded ? undefined : new PostgresClusterVersions({ sql: stores.sql, timeoutMs: config.storeTimeoutMs });
  const clientKeys = new ClientKeyService({ uow, store: clientKeyStore, verifier: assertionVerifier, hasher: pools, bus, revocations, apiKeyPrefix: config.apiKeyPrefix, cluster });
  return { feedCredentials, platforms, agents, clientKeys };
}
