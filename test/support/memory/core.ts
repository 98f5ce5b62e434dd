// The core's services wired on memory ports, as src/app/domain.ts wires them on the real adapters: the
// rules of token exchange, agents, platforms, keys and revocation run in process in milliseconds.
import { randomBytes } from 'node:crypto';
import { LocalBus } from '../../../src/adapters/cache/invalidation-bus.js';
import { Limiters } from '../../../src/adapters/ratelimit/limiters.js';
import { CachedStore } from '../../../src/adapters/cache/cached-store.js';
import client from 'prom-client';
import { CacheMetrics } from '../../../src/adapters/cache/cache-metrics.js';
import { AgentService } from '../../../src/core/agents/agent-service.js';
import { Argon2Share } from '../../../src/core/credentials/argon2-share.js';
import { Authenticator } from '../../../src/core/credentials/authenticator.js';
import { VerifiedCredentials } from '../../../src/core/credentials/verified-cache.js';
import { KeyManager } from '../../../src/core/keys/key-manager.js';
import { PlatformService } from '../../../src/core/platforms/platform-service.js';
import type { GeneratedKey, KeyMaterial, TokenSigner } from '../../../src/core/ports/crypto.js';
import type { LimiterName, Telemetry, TelemetryEvent } from '../../../src/core/ports/telemetry.js';
import { RevocationService } from '../../../src/core/revocation/revocation-service.js';
import { TokenService } from '../../../src/core/tokens/token-service.js';
import { ANY_CLOCK, type IssuingClock } from '../../../src/core/ports/clock.js';
import { MemoryAuditSink, MemoryHasher, MemoryRevocationLog, MemorySigner, MemoryStore } from './memory-store.js';
import { MemoryUnitOfWork } from './unit-of-work.js';
import { FeedCredentialService } from '../../../src/core/revocation/feed-credential-service.js';
import { ClientKeyIndex } from '../../../src/core/credentials/client-key-index.js';
import { AssertionAuthenticator } from '../../../src/core/credentials/assertion-authenticator.js';
import { ClientKeyService } from '../../../src/core/agents/client-key-service.js';
import { decoyKeys, JoseAssertionVerifier } from '../../../src/adapters/crypto/assertion-verifier.js';
import { MemoryReplayGuard } from '../../../src/adapters/cache/replay-guard.js';

/** Key material without RSA: a random kid, a placeholder public key, the "private key" in clear. */
export class MemoryKeyMaterial implements KeyMaterial {
  async generate(): Promise<GeneratedKey> {
    const kid = `kid-${randomBytes(6).toString('hex')}`;
    return { kid, publicJwk: { kty: 'RSA', n: Buffer.from(kid).toString('base64url'), e: 'AQAB' }, privateKeyEncrypted: `clear:${kid}` };
  }

  decrypt(kid: string, privateKeyEncrypted: string): string {
    if (privateKeyEncrypted !== `clear:${kid}`) throw new Error(`cannot open the key ${kid}`);
    return `PEM of ${kid}`;
  }
}

export interface CoreOptions {
  /** The cluster-version gate's source (absent: no gate, one release). */
  cluster?: import('../../../src/core/ports/cluster-versions.js').ClusterVersions;
  tokenPoints?: number;
  authFailPoints?: number;
  tokenWindowSeconds?: number;
  authFailWindowSeconds?: number;
  argon2MaxPerAddress?: number;
  propagationSeconds?: number;
  /** Real key material and signer (RSA, jose) where tokens must verify; default: the memory ones. */
  material?: KeyMaterial;
  signer?: TokenSigner;
  issuer?: string;
  apiKeyPrefix?: string;
  tokenTtlSeconds?: number;
  /** The token service's clock check (default: none). */
  clock?: IssuingClock;
  /** Where the core's events also go (the in-process app passes the service's metrics and logs). */
  telemetry?: Telemetry;
}

export const ISSUER = 'https://ace.test';
/** Who makes the admin changes of the core's tests (recorded in their audit events). */
export const BY = { actor: 'admin', clientAddress: '127.0.0.1' };
export const TOKEN_TTL_SECONDS = 900;
export const API_KEY_PREFIX = 'agnt_kid_';

export async function memoryCore(options: CoreOptions = {}) {
  // The memory records behind the cached store of production (in-process cache only): its invalidations
  // are what makes the verified-secret memory and the caches forget a changed agent.
  const memory = new MemoryStore();
  const log = new MemoryRevocationLog(memory);
  const bus = new LocalBus();
  const store = new CachedStore({ inner: memory, redis: undefined, keyPrefix: 'core:', redisTtlSeconds: 300, localTtlMs: 60_000, localMaxEntries: 1000, bus, metrics: new CacheMetrics({ registry: new client.Registry() }) });
  const hasher = new MemoryHasher();
  const signer = new MemorySigner();
  const audit = new MemoryAuditSink();
  const telemetry: TelemetryEvent[] = [];
  const record = {
    record: (event: TelemetryEvent) => {
      telemetry.push(event);
      options.telemetry?.record(event);
    },
  };
  const refusals: LimiterName[] = [];
  const limits = new Limiters({
    redis: undefined,
    keyPrefix: `core-${randomBytes(4).toString('hex')}:`,
    tokenPoints: options.tokenPoints ?? 1000,
    tokenWindowSeconds: options.tokenWindowSeconds ?? 60,
    authFailPoints: options.authFailPoints ?? 1000,
    authFailWindowSeconds: options.authFailWindowSeconds ?? 60,
    onRefusal: (limiter) => {
      refusals.push(limiter);
      options.telemetry?.record({ type: 'rate_limited', limiter });
    },
  });
  // Admin changes as in production: the memory unit of work, wrapped by the cached store (cache drops after commit).
  const memoryUow = new MemoryUnitOfWork(memory, log, audit);
  const uow = store.unitOfWork(memoryUow);
  const revocations = new RevocationService({ bus, tokenTtlSeconds: options.tokenTtlSeconds ?? TOKEN_TTL_SECONDS, clockSkewSeconds: 60, issuedSlackSeconds: 1 });
  const keys = new KeyManager({
    store,
    uow,
    bus,
    material: options.material ?? new MemoryKeyMaterial(),
    revocations,
    audit,
    telemetry: record,
    tokenTtlSeconds: options.tokenTtlSeconds ?? TOKEN_TTL_SECONDS,
    clockSkewSeconds: 60,
    propagationSeconds: options.propagationSeconds ?? 3600,
    rotationIntervalSeconds: 0,
    refreshSeconds: 3600,
  });
  await keys.start();
  const authenticator = new Authenticator({
    store,
    hasher,
    limits,
    verified: new VerifiedCredentials({ maxEntries: 1000, ttlMs: 60_000 }),
    share: new Argon2Share({ maxPerAddress: options.argon2MaxPerAddress ?? 8, onRefusal: () => record.record({ type: 'rate_limited', limiter: 'argon2_share_per_address' }) }),
    bus,
    telemetry: record,
  });
  await authenticator.init();
  const verifier = new JoseAssertionVerifier({ allowLoopback: true, allowPrivate: false, timeoutMs: 2000, jwksCacheSeconds: 60, jwksCooldownSeconds: 0 });
  const clientKeyIndex = new ClientKeyIndex({ store: memoryUow.clientKeys, verifier, bus, telemetry: record });
  await clientKeyIndex.init();
  const assertions = new AssertionAuthenticator({
    index: clientKeyIndex,
    verifier,
    replays: new MemoryReplayGuard(),
    store,
    limits,
    telemetry: record,
    audiences: [`${options.issuer ?? ISSUER}/oauth2/token`, options.issuer ?? ISSUER],
    maxAssertionLifetimeSeconds: 300,
    maxWorkloadTokenLifetimeSeconds: 86_400,
    clockToleranceSeconds: 30,
    decoyKeys: await decoyKeys(),
  });
  const tokens = new TokenService({
    authenticator,
    assertions,
    limits,
    keys,
    signer: options.signer ?? signer,
    audit,
    issuer: options.issuer ?? ISSUER,
    tokenTtlSeconds: options.tokenTtlSeconds ?? TOKEN_TTL_SECONDS,
    clock: options.clock ?? ANY_CLOCK,
  });
  const clientKeys = new ClientKeyService({ uow, store: memoryUow.clientKeys, verifier, hasher, bus, revocations, apiKeyPrefix: options.apiKeyPrefix ?? API_KEY_PREFIX, cluster: options.cluster });
  const agents = new AgentService({ store, uow, hasher, revocations, apiKeyPrefix: options.apiKeyPrefix ?? API_KEY_PREFIX });
  const platforms = new PlatformService({ store, uow, revocations, enrichmentTimeoutMs: 200 });
  const feedCredentials = new FeedCredentialService({ store: memoryUow.feedCredentials, uow, bus });
  return { clientKeys, feedCredentials, memory, memoryUow, uow, store, log, bus, hasher, signer, audit, telemetry, refusals, limits, revocations, keys, authenticator, tokens, agents, platforms, stop: () => keys.stop() };
}

export type MemoryCore = Awaited<ReturnType<typeof memoryCore>>;
