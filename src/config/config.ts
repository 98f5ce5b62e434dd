// Configuration from environment variables, validated once at start.
// Every bad value is reported (all at once) with the variable's name and what it expects.
import os from 'node:os';
import path from 'node:path';

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
  argon2MaxQueue: number;
  signThreads: number;
  signMaxQueue: number;
  /** A task running longer is treated as a hung worker: the thread is replaced, the request gets 503. */
  argon2TaskTimeoutMs: number;
  signTaskTimeoutMs: number;
  rateLimitTokenPoints: number;
  rateLimitTokenWindowSeconds: number;
  rateLimitAuthFailPoints: number;
  rateLimitAuthFailWindowSeconds: number;
  trustProxy: boolean;
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
  verifiedCacheMaxEntries: number;
  storeTimeoutMs: number;
  enrichmentTimeoutMs: number;
  shutdownTimeoutMs: number;
  databasePoolSize: number;
  audit: AuditConfig;
}

/** The audit trail (README, Audit trail). */
export interface AuditConfig {
  /** AUDIT=off records nothing (for comparison benchmarks); the default is on. */
  enabled: boolean;
  retentionDays: number;
  flushMs: number;
  batchMax: number;
  maxInFlight: number;
  writeTimeoutMs: number;
  spoolMaxBytes: number;
  drainIntervalMs: number;
  poolSize: number;
  maintenanceIntervalSeconds: number;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const read = new EnvReader(env, problems);
  const cores = Math.max(1, os.availableParallelism?.() ?? os.cpus().length);

  const host = read.string('HOST', '0.0.0.0');
  const port = read.port('PORT', 8080);
  const adminHost = read.string('ADMIN_HOST', '127.0.0.1');
  const adminPort = read.port('ADMIN_PORT', 8081);
  if (port !== 0 && port === adminPort) problems.push('PORT and ADMIN_PORT must differ (the admin API never shares the public port)');
  const redisUrl = read.optionalUrl('REDIS_URL', ['redis:', 'rediss:']);
  const publicBaseUrl = read.optionalUrl('PUBLIC_BASE_URL', ['http:', 'https:']) ??
    `http://${host === '0.0.0.0' || host === '::' ? 'localhost' : host}:${port}`;

  const adminToken = env.ADMIN_TOKEN || undefined;
  if (adminToken !== undefined && adminToken.length < 16) problems.push('ADMIN_TOKEN must be at least 16 characters');

  const apiKeyPrefix = read.string('API_KEY_PREFIX', 'agnt_kid_');
  if (!/^[a-z0-9]{4}_kid_$/.test(apiKeyPrefix)) {
    problems.push(`API_KEY_PREFIX must be exactly 4 lowercase letters or digits followed by "_kid_" (got "${apiKeyPrefix}")`);
  }

  // Measured (README, Performance): one HTTP process keeps up with the signatures of ~4 cores, and a
  // second one on 2 cores only adds memory and context switches.
  const workersDefault = redisUrl ? Math.max(1, Math.ceil(cores / 4)) : 1;
  const workers = read.int('WORKERS', workersDefault, 1, 64);
  if (workers > 1 && !redisUrl) {
    problems.push('WORKERS > 1 needs REDIS_URL: separate processes cannot share the in-process cache, rate limiter and invalidation bus');
  }

  const config: Config = {
    host,
    port,
    adminHost,
    adminPort,
    adminToken,
    dataDir: path.resolve(read.string('DATA_DIR', './data')),
    databaseUrl: read.optionalUrl('DATABASE_URL', ['postgres:', 'postgresql:']),
    redisUrl,
    redisKeyPrefix: read.string('REDIS_KEY_PREFIX', 'ace:'),
    apiKeyPrefix,
    publicBaseUrl: publicBaseUrl.replace(/\/+$/, ''),
    issuer: read.string('ISSUER', publicBaseUrl.replace(/\/+$/, '')),
    tokenTtlSeconds: read.int('TOKEN_TTL_SECONDS', 900, 1, 86_400),
    logLevel: read.oneOf('LOG_LEVEL', 'info', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    accessLog: read.bool('ACCESS_LOG', false),
    workers,
    argon2Threads: read.int('ARGON2_THREADS', cores, 1, 256),
    argon2MaxQueue: read.int('ARGON2_MAX_QUEUE', 64, 0, 100_000),
    // jose signs through WebCrypto on libuv's thread pool; a signing thread only batches and dispatches.
    signThreads: read.int('SIGN_THREADS', 1, 1, 256),
    signMaxQueue: read.int('SIGN_MAX_QUEUE', 2048, 0, 1_000_000),
    argon2TaskTimeoutMs: read.int('ARGON2_TASK_TIMEOUT_MS', 10_000, 100, 600_000),
    signTaskTimeoutMs: read.int('SIGN_TASK_TIMEOUT_MS', 5_000, 100, 600_000),
    rateLimitTokenPoints: read.int('RATE_LIMIT_TOKEN_POINTS', 120, 1, 1e9),
    rateLimitTokenWindowSeconds: read.int('RATE_LIMIT_TOKEN_WINDOW_SECONDS', 60, 1, 86_400),
    rateLimitAuthFailPoints: read.int('RATE_LIMIT_AUTH_FAIL_POINTS', 20, 1, 1e9),
    rateLimitAuthFailWindowSeconds: read.int('RATE_LIMIT_AUTH_FAIL_WINDOW_SECONDS', 60, 1, 86_400),
    trustProxy: read.bool('TRUST_PROXY', false),
    keyEncryptionKey: read.key32('KEY_ENCRYPTION_KEY'),
    keyPropagationSeconds: read.int('KEY_PROPAGATION_SECONDS', 5, 0, 3600),
    keyClockSkewSeconds: read.int('KEY_CLOCK_SKEW_SECONDS', 60, 0, 3600),
    keyRotationIntervalSeconds: read.int('KEY_ROTATION_INTERVAL_SECONDS', 0, 0, 10 * 365 * 86_400),
    keyRefreshSeconds: read.int('KEY_REFRESH_SECONDS', 1, 1, 60),
    cacheTtlSeconds: read.int('CACHE_TTL_SECONDS', 300, 1, 86_400),
    localCacheTtlMs: read.int('LOCAL_CACHE_TTL_MS', 5000, 0, 3_600_000),
    localCacheMaxEntries: read.int('LOCAL_CACHE_MAX_ENTRIES', 50_000, 0, 10_000_000),
    verifiedCacheTtlSeconds: read.int('VERIFIED_CACHE_TTL_SECONDS', 900, 0, 86_400),
    verifiedCacheMaxEntries: read.int('VERIFIED_CACHE_MAX_ENTRIES', 100_000, 0, 10_000_000),
    storeTimeoutMs: read.int('STORE_TIMEOUT_MS', 2000, 50, 60_000),
    enrichmentTimeoutMs: read.int('ENRICHMENT_TIMEOUT_MS', 100, 1, 10_000),
    shutdownTimeoutMs: read.int('SHUTDOWN_TIMEOUT_MS', 10_000, 100, 300_000),
    databasePoolSize: read.int('DATABASE_POOL_SIZE', 10, 1, 500),
    audit: {
      enabled: read.bool('AUDIT', true),
      retentionDays: read.int('AUDIT_RETENTION_DAYS', 90, 1, 36_500),
      flushMs: read.int('AUDIT_FLUSH_MS', 2, 0, 1000),
      batchMax: read.int('AUDIT_BATCH_MAX', 1000, 1, 10_000),
      maxInFlight: read.int('AUDIT_MAX_IN_FLIGHT', 1, 1, 64),
      writeTimeoutMs: read.int('AUDIT_WRITE_TIMEOUT_MS', 1000, 50, 60_000),
      spoolMaxBytes: read.int('AUDIT_SPOOL_MAX_BYTES', 1024 ** 3, 0, 2 ** 50),
      drainIntervalMs: read.int('AUDIT_DRAIN_INTERVAL_MS', 1000, 50, 60_000),
      poolSize: read.int('AUDIT_POOL_SIZE', 3, 1, 64),
      maintenanceIntervalSeconds: read.int('AUDIT_MAINTENANCE_INTERVAL_SECONDS', 3600, 1, 86_400),
    },
  };
  if (config.keyPropagationSeconds < config.keyRefreshSeconds * 2) {
    problems.push('KEY_PROPAGATION_SECONDS must be at least twice KEY_REFRESH_SECONDS, so every instance publishes a new key before any signs with it');
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

class EnvReader {
  constructor(private readonly env: Env, private readonly problems: string[]) {}

  private raw(name: string): string | undefined {
    const value = this.env[name];
    return value === undefined || value === '' ? undefined : value.trim();
  }

  string(name: string, fallback: string): string {
    return this.raw(name) ?? fallback;
  }

  int(name: string, fallback: number, min: number, max: number): number {
    const value = this.raw(name);
    if (value === undefined) return fallback;
    if (!/^-?\d+$/.test(value)) {
      this.problems.push(`${name} must be a whole number (got "${value}")`);
      return fallback;
    }
    const n = Number(value);
    if (n < min || n > max) {
      this.problems.push(`${name} must be between ${min} and ${max} (got ${n})`);
      return fallback;
    }
    return n;
  }

  port(name: string, fallback: number): number {
    return this.int(name, fallback, 0, 65_535);
  }

  bool(name: string, fallback: boolean): boolean {
    const value = this.raw(name)?.toLowerCase();
    if (value === undefined) return fallback;
    if (['1', 'true', 'yes', 'on'].includes(value)) return true;
    if (['0', 'false', 'no', 'off'].includes(value)) return false;
    this.problems.push(`${name} must be true or false (got "${value}")`);
    return fallback;
  }

  oneOf(name: string, fallback: string, allowed: string[]): string {
    const value = this.raw(name);
    if (value === undefined) return fallback;
    if (!allowed.includes(value)) {
      this.problems.push(`${name} must be one of ${allowed.join(', ')} (got "${value}")`);
      return fallback;
    }
    return value;
  }

  optionalUrl(name: string, protocols: string[]): string | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    try {
      const url = new URL(value);
      if (!protocols.includes(url.protocol)) {
        this.problems.push(`${name} must be a ${protocols.join(' or ')} URL (got protocol "${url.protocol}")`);
      }
    } catch {
      // Never echo the value: it may carry a password.
      this.problems.push(`${name} is not a valid URL`);
    }
    return value;
  }

  /** 32 bytes, given as 64 hex characters or base64/base64url. Never echoed. */
  key32(name: string): Buffer | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    const bytes = /^[0-9a-fA-F]{64}$/.test(value) ? Buffer.from(value, 'hex') : Buffer.from(value, 'base64');
    if (bytes.length !== 32) {
      this.problems.push(`${name} must be 32 bytes, as 64 hex characters or base64 (got ${bytes.length} bytes)`);
      return undefined;
    }
    return bytes;
  }
}
