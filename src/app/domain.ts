// The domain services of one process and what they run on: crypto pools, rate limiters, signing keys,
// credentials, the audit trail, tokens, revocations, platforms and agents.
import type { Config } from '../config/config.js';
import type { Logger } from '../adapters/telemetry/logger.js';
import type { Metrics } from '../adapters/telemetry/metrics.js';
import { CryptoPools } from '../adapters/crypto/pools.js';
import { Limiters } from '../adapters/ratelimit/limiters.js';
import { Argon2Share } from '../adapters/ratelimit/argon2-share.js';
import { VerifiedCredentials } from '../core/credentials/verified-cache.js';
import { Authenticator } from '../core/credentials/authenticator.js';
import { KeyManager } from '../core/keys/key-manager.js';
import { loadOrCreateKeyEncryptionKey } from '../core/keys/key-encryption.js';
import { TokenService } from '../core/tokens/token-service.js';
import { PlatformService } from '../core/platforms/platform-service.js';
import { AgentService } from '../core/agents/agent-service.js';
import { PostgresRevocationStore } from '../adapters/postgres/revocation-store.js';
import { RevocationService } from '../core/revocation/revocation-service.js';
import { RevocationMetrics } from '../adapters/telemetry/revocation-metrics.js';
import { startAudit } from './audit.js';
import { auditEvents, SCHEDULER_ACTOR } from '../core/audit/events.js';
import type { Stores } from './stores.js';
import type { Cleanups } from './cleanups.js';

export type Domain = Awaited<ReturnType<typeof startDomain>>;

export async function startDomain(config: Config, logger: Logger, metrics: Metrics, stores: Stores, cleanups: Cleanups) {
  const { store, bus, redis } = stores;
  const pools = new CryptoPools(config, metrics);
  cleanups.add(() => pools.close());
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
  cleanups.add(() => keys.stop());
  metrics.registerKeyInfo(() => keys.keyInfo());

  const verified = new VerifiedCredentials(config.verifiedCacheMaxEntries, config.verifiedCacheTtlSeconds * 1000);
  const share = new Argon2Share(config.argon2MaxPerAddress, () => metrics.rateLimited('argon2_share_per_address'));
  const authenticator = new Authenticator(store, pools, limiters, verified, metrics, share, bus);
  await authenticator.init();

  const audit = await startAudit({
    config: config.audit,
    databaseUrl: stores.databaseUrl,
    embedded: stores.embedded,
    readTimeoutMs: config.storeTimeoutMs,
    dataDir: config.dataDir,
    logger,
    metrics,
  });
  cleanups.add(() => audit.close());
  keys.onScheduledRotation = (kid) =>
    audit.sink.emit(auditEvents.adminChange('key.rotated', { actor: SCHEDULER_ACTOR, clientAddress: '', kid, status: 'next' }));
  const tokens = new TokenService(authenticator, limiters, keys, pools, { issuer: config.issuer, tokenTtlSeconds: config.tokenTtlSeconds }, audit.sink);

  const revocationMetrics = new RevocationMetrics(metrics.registry);
  const revocations = new RevocationService(
    new PostgresRevocationStore(stores.sql, config.storeTimeoutMs),
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
  return { pools, limiters, keys, authenticator, audit, tokens, revocations, revocationMetrics, platforms, agents };
}
