// The service's configuration as the rest of the code reads it (loaded and checked by config.ts from the
// settings table in settings.ts).

export interface Config {
  host: string;
  port: number;
  adminHost: string;
  adminPort: number;
  /** Unset: generated into DATA_DIR/admin-token at start. */
  adminToken: string | undefined;
  dataDir: string;
  /** Unset: embedded PGlite in DATA_DIR. */
  databaseUrl: string | undefined;
  /** Unset: in-process cache, limiter and invalidation bus. */
  redisUrl: string | undefined;
  /** Sentinel `host:port` list (with redisSentinelMaster) or Cluster seed nodes; '' when unset (see redis-settings.ts). */
  redisSentinels: string;
  redisSentinelMaster: string;
  redisClusterNodes: string;
  redisPassword: string | undefined;
  redisSentinelPassword: string | undefined;
  redisTls: boolean;
  redisKeyPrefix: string;
  apiKeyPrefix: string;
  publicBaseUrl: string;
  issuer: string;
  tokenTtlSeconds: number;
  logLevel: string;
  accessLog: boolean;
  /** HTTP processes (node:cluster). */
  workers: number;
  argon2Threads: number;
  /** libuv's thread pool (set by main.ts before anything starts it); validated here, used by libuv. */
  uvThreadpoolSize: number;
  argon2MaxQueue: number;
  /** Credential checks one client address may have queued or running at once (per process). */
  argon2MaxPerAddress: number;
  signThreads: number;
  signMaxQueue: number;
  /** A task running longer is treated as a hung worker: the thread is replaced, the request gets 503. */
  argon2TaskTimeoutMs: number;
  signTaskTimeoutMs: number;
  /** How long after start a cold check that finds the argon2 line full may wait instead of a 503. */
  warmupSeconds: number;
  /** The longest such a wait lasts. */
  warmupMaxWaitMs: number;
  rateLimitTokenPoints: number;
  rateLimitTokenWindowSeconds: number;
  rateLimitTokenLease: number;
  rateLimitAuthFailPoints: number;
  rateLimitAuthFailWindowSeconds: number;
  trustProxy: boolean;
  /** X-Forwarded-For hops appended by trusted proxies (TRUST_PROXY=true means 1). */
  trustProxyHops: number;
  /** Comma-separated proxy addresses/ranges; when non-empty, replaces the hop count. */
  trustProxyCidrs: string;
  /** With trustProxyHops: the direct peers that may be the proxy; empty means PRIVATE_RANGES. */
  trustProxyPeers: string;
  adminAuthFailPoints: number;
  adminAuthFailWindowSeconds: number;
  /** 32-byte key-encryption key for private signing keys; unset: generated into DATA_DIR. */
  keyEncryptionKey: Buffer | undefined;
  keyPropagationSeconds: number;
  keyClockSkewSeconds: number;
  /** 0 = automatic rotation off. */
  keyRotationIntervalSeconds: number;
  keyRefreshSeconds: number;
  cacheTtlSeconds: number;
  localCacheTtlMs: number;
  localCacheMaxEntries: number;
  verifiedCacheTtlSeconds: number;
  clientAssertionMaxLifetimeSeconds: number;
  workloadTokenMaxLifetimeSeconds: number;
  clientAssertionClockToleranceSeconds: number;
  jwksUriAllowLoopback: boolean;
  jwksUriAllowPrivate: boolean;
  jwksUriTimeoutMs: number;
  jwksUriCacheSeconds: number;
  jwksUriCooldownSeconds: number;
  verifiedCacheMaxEntries: number;
  storeTimeoutMs: number;
  enrichmentTimeoutMs: number;
  /** After SIGTERM: not ready at once, still serving this long before the listeners close. */
  shutdownDrainSeconds: number;
  shutdownTimeoutMs: number;
  databasePoolSize: number;
  /** A revocation also voids tokens issued up to this long after the change. */
  revocationIssuedSlackSeconds: number;
  clockSkewMaxSeconds: number;
  /** How often each process compares its subscribed revocation feeds with Postgres. */
  revocationPollMs: number;
  revocationHeartbeatSeconds: number;
  revocationWsMaxPerAddress: number;
  revocationWsMax: number;
  audit: AuditConfig;
}

/** The audit trail (README, Audit trail). */
export interface AuditConfig {
  /** AUDIT=off records nothing (for comparison benchmarks); the default is on. */
  enabled: boolean;
  retentionDays: number;
  flushMs: number;
  lingerMs: number;
  batchMax: number;
  maxInFlight: number;
  writeTimeoutMs: number;
  spoolMaxBytes: number;
  drainIntervalMs: number;
  poolSize: number;
  maintenanceIntervalSeconds: number;
  /** Credential refusals recorded one by one per address and per agent in a window (refusals.ts). */
  refusalsPerWindow: number;
  refusalWindowSeconds: number;
}
