// Every setting, declared once: its environment variable, type, default, bounds and meaning. The loader
// (config.ts), the README's configuration table (scripts/settings-table.mjs, checked by a unit test) and
// the Kubernetes ConfigMap check all derive from this table, so they cannot drift apart.
import { isIPv6 } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { AuditConfig, Config } from './types.js';
import { parsePostgresUrl } from '../support/postgres-url.js';

/** What a default may depend on: the values read before it, and the machine. */
export interface DefaultContext {
  values: Partial<Config>;
  cores: number;
}

interface Common {
  /** The environment variable. */
  env: string;
  /** The Config field it fills ("audit.x": config.audit.x); none for variables read by Node itself (validated only). */
  key?: keyof Config | `audit.${keyof AuditConfig}`;
  /** The default as the README shows it. */
  defaultText: string;
  meaning: string;
}

export type Setting = Common &
  (
    | { type: 'string'; default: string | ((c: DefaultContext) => string); normalise?: (value: string) => string }
    | { type: 'int'; default: number | ((c: DefaultContext) => number); min: number; max: number }
    | { type: 'bool'; default: boolean }
    | { type: 'oneOf'; default: string; allowed: string[] }
    /** Never echoed in errors: URLs may carry passwords. */
    | {
        type: 'url';
        protocols: string[];
        default?: (c: DefaultContext) => string;
        normalise?: (value: string) => string;
        /** Replaces the WHATWG URL check (e.g. libpq's multi-host form); returns problems naming the variable. */
        validate?: (value: string, env: string) => string[];
      }
    /** 32 bytes as 64 hex characters or base64; never echoed. */
    | { type: 'key32' }
    /** A secret string, unset when empty; never echoed. */
    | { type: 'secret'; minLength: number }
  );

export const cores = (): number => Math.max(1, os.availableParallelism?.() ?? os.cpus().length);
/** libuv's pool, where WebCrypto runs the RSA signatures: one thread per core measured faster than 4 on 2 cores. */
export const defaultUvThreadpoolSize = (coreCount = cores()): number => Math.max(2, coreCount);

/** http://[::1]:8080 for IPv6 literals; the wildcard addresses become localhost. */
export function defaultBaseUrl(host: string, port: number): string {
  if (host === '0.0.0.0' || host === '::') return `http://localhost:${port}`;
  return `http://${isIPv6(host) ? `[${host}]` : host}:${port}`;
}

// Order matters where a default reads an earlier value (PUBLIC_BASE_URL after HOST/PORT, ISSUER after
// PUBLIC_BASE_URL, WORKERS after REDIS_URL).
export const SETTINGS: readonly Setting[] = [
  { env: 'HOST', key: 'host', type: 'string', default: '0.0.0.0', defaultText: '`0.0.0.0`', meaning: 'public listener address' },
  { env: 'PORT', key: 'port', type: 'int', default: 8080, min: 0, max: 65_535, defaultText: '`8080`', meaning: 'public listener port' },
  { env: 'ADMIN_HOST', key: 'adminHost', type: 'string', default: '127.0.0.1', defaultText: '`127.0.0.1`', meaning: 'internal listener address: admin API, metrics, health' },
  { env: 'ADMIN_PORT', key: 'adminPort', type: 'int', default: 8081, min: 0, max: 65_535, defaultText: '`8081`', meaning: 'internal listener port (never the public one)' },
  { env: 'ADMIN_TOKEN', key: 'adminToken', type: 'secret', minLength: 16, defaultText: 'generated into `DATA_DIR/admin-token` (0600)', meaning: 'bearer token of the admin API (16+ characters)' },
  { env: 'DATA_DIR', key: 'dataDir', type: 'string', default: './data', normalise: (dir) => path.resolve(dir), defaultText: '`./data`', meaning: 'embedded database and generated files' },
  { env: 'DATABASE_URL', key: 'databaseUrl', type: 'url', protocols: ['postgres:', 'postgresql:'], validate: (value, env) => parsePostgresUrl(value, env).problems, defaultText: 'unset: embedded PGlite', meaning: 'Postgres URL' },
  { env: 'DATABASE_POOL_SIZE', key: 'databasePoolSize', type: 'int', default: 10, min: 1, max: 500, defaultText: '`10`', meaning: 'connections per process' },
  { env: 'REDIS_URL', key: 'redisUrl', type: 'url', protocols: ['redis:', 'rediss:'], defaultText: 'unset: in-process', meaning: 'Redis URL (cache, shared rate limits, invalidation bus)' },
  { env: 'REDIS_SENTINELS', key: 'redisSentinels', type: 'string', default: '', defaultText: 'unset', meaning: 'Redis through Sentinel: comma-separated sentinel `host:port` list (with `REDIS_SENTINEL_MASTER`); instead of `REDIS_URL`' },
  { env: 'REDIS_SENTINEL_MASTER', key: 'redisSentinelMaster', type: 'string', default: '', defaultText: 'unset', meaning: 'the master name the sentinels monitor' },
  { env: 'REDIS_CLUSTER_NODES', key: 'redisClusterNodes', type: 'string', default: '', defaultText: 'unset', meaning: 'Redis Cluster: comma-separated seed `host:port` list; instead of `REDIS_URL`' },
  { env: 'REDIS_PASSWORD', key: 'redisPassword', type: 'secret', minLength: 1, defaultText: 'unset', meaning: 'password of the Redis data nodes (for `REDIS_URL`: when the URL carries none)' },
  { env: 'REDIS_SENTINEL_PASSWORD', key: 'redisSentinelPassword', type: 'secret', minLength: 1, defaultText: 'unset', meaning: 'password of the sentinels themselves' },
  { env: 'REDIS_TLS', key: 'redisTls', type: 'bool', default: false, defaultText: '`false` (`rediss://` implies `true`)', meaning: 'TLS to Redis (data nodes and sentinels)' },
  { env: 'REDIS_KEY_PREFIX', key: 'redisKeyPrefix', type: 'string', default: 'ace:', defaultText: '`ace:`', meaning: 'prefix of every Redis key and the pub/sub channel' },
  { env: 'API_KEY_PREFIX', key: 'apiKeyPrefix', type: 'string', default: 'agnt_kid_', defaultText: '`agnt_kid_`', meaning: '4 lowercase letters/digits + `_kid_`' },
  {
    env: 'PUBLIC_BASE_URL', key: 'publicBaseUrl', type: 'url', protocols: ['http:', 'https:'],
    default: ({ values }) => defaultBaseUrl(values.host!, values.port!),
    normalise: (url) => url.replace(/\/+$/, ''),
    defaultText: '`http://localhost:$PORT` when `HOST` is a wildcard (`0.0.0.0`, `::`), else `http://$HOST:$PORT` (an IPv6 `HOST` in brackets: `http://[::1]:8080`)',
    meaning: 'public address (OpenAPI `servers`, default issuer); set it in production',
  },
  { env: 'ISSUER', key: 'issuer', type: 'string', default: ({ values }) => values.publicBaseUrl!, defaultText: '`PUBLIC_BASE_URL`', meaning: 'JWT `iss`' },
  { env: 'TOKEN_TTL_SECONDS', key: 'tokenTtlSeconds', type: 'int', default: 900, min: 1, max: 86_400, defaultText: '`900`', meaning: 'token lifetime (`expires_in`)' },
  {
    env: 'WORKERS', key: 'workers', type: 'int', min: 1, max: 64,
    // Measured (README, Performance): one HTTP process keeps up with the signatures of ~4 cores, and a
    // second one on 2 cores only adds memory and context switches.
    default: ({ values, cores }) => (values.redisUrl || values.redisSentinels || values.redisClusterNodes ? Math.max(1, Math.ceil(cores / 4)) : 1),
    defaultText: 'ceil(cores / 4) with Redis, else `1` (more needs Redis)',
    meaning: 'HTTP processes (node:cluster, SO_REUSEPORT); see Performance',
  },
  {
    // libuv caps its pool at 1024 threads; main.ts sets the default before anything starts the pool.
    env: 'UV_THREADPOOL_SIZE', key: 'uvThreadpoolSize', type: 'int', min: 1, max: 1024, default: ({ cores }) => defaultUvThreadpoolSize(cores),
    defaultText: 'cores (at least 2)', meaning: "libuv's pool (WebCrypto verifications of client assertions, DNS, files; read by Node; pin it to the CPU limit in containers)",
  },
  {
    // Each thread is a V8 isolate (~13 MiB idle, measured) plus argon2's 19 MiB while it hashes: the embedded
    // default, meant for a laptop or a small pod, keeps two (docs/storage.md#memory-of-the-embedded-default).
    env: 'ARGON2_THREADS', key: 'argon2Threads', type: 'int', min: 1, max: 256,
    default: ({ values, cores }) => (values.databaseUrl ? cores : Math.min(cores, 2)),
    defaultText: 'cores (at most 2 on the embedded default)', meaning: 'argon2 verification threads',
  },
  { env: 'ARGON2_MAX_QUEUE', key: 'argon2MaxQueue', type: 'int', default: 64, min: 0, max: 100_000, defaultText: '`64`', meaning: 'argon2 waiting line; a full queue answers 503 at once' },
  {
    // A small share of the queue by default, so one address can never fill it alone.
    env: 'ARGON2_MAX_PER_ADDRESS', key: 'argon2MaxPerAddress', type: 'int', min: 1, max: 100_000,
    default: ({ values }) => Math.max(1, Math.floor(values.argon2MaxQueue! / 16)),
    defaultText: '`ARGON2_MAX_QUEUE` / 16 (at least 1)',
    meaning: 'checks one client address may have queued or running (per process); beyond it 429; at most `ARGON2_MAX_QUEUE`',
  },
  {
    // Each signing thread signs its batch itself (node:crypto, synchronously): the threads are the signing
    // parallelism, shared out among the HTTP processes (at most 2 on the embedded default, as for argon2).
    env: 'SIGN_THREADS', key: 'signThreads', type: 'int', min: 1, max: 256,
    default: ({ values, cores }) => Math.max(1, values.databaseUrl ? Math.ceil(cores / values.workers!) : Math.min(cores, 2)),
    defaultText: 'cores / `WORKERS`, rounded up (at most 2 on the embedded default)', meaning: 'signing threads per HTTP process (each signs its batches of RS256 tokens itself)',
  },
  { env: 'SIGN_MAX_QUEUE', key: 'signMaxQueue', type: 'int', default: 2048, min: 0, max: 1_000_000, defaultText: '`2048`', meaning: 'signing waiting line' },
  // At least 1 s: one argon2id verification takes 30-60 ms on an idle core and several times that on a
  // contended one; a shorter bound replaced healthy threads (their requests answered 503) and could not start.
  { env: 'ARGON2_TASK_TIMEOUT_MS', key: 'argon2TaskTimeoutMs', type: 'int', default: 10_000, min: 1000, max: 600_000, defaultText: '`10000`', meaning: 'an argon2 task running longer is a hung worker: its thread is replaced, its request gets 503 (at least 1 s: one verification takes several times its idle 30–60 ms on a busy core)' },
  { env: 'SIGN_TASK_TIMEOUT_MS', key: 'signTaskTimeoutMs', type: 'int', default: 5_000, min: 1000, max: 600_000, defaultText: '`5000`', meaning: 'the same bound for signing tasks' },
  // A fresh instance gets its full share of a fleet at once, and agents no instance has verified yet all need
  // argon2: a slow start instead of a 503 for each check beyond the usual line. The wait stays well under
  // the agent client's default call timeout (10 s).
  { env: 'WARMUP_SECONDS', key: 'warmupSeconds', type: 'int', default: 60, min: 0, max: 3600, defaultText: '`60`', meaning: 'after start, cold credential checks that find the argon2 queue full wait (up to `WARMUP_MAX_WAIT_MS`) instead of a 503; 0: never' },
  { env: 'WARMUP_MAX_WAIT_MS', key: 'warmupMaxWaitMs', type: 'int', default: 5000, min: 100, max: 60_000, defaultText: '`5000`', meaning: 'during the warm-up the argon2 queue holds what the pool verifies in this long; a check still waiting then, or beyond that, gets 503 with Retry-After' },
  { env: 'RATE_LIMIT_TOKEN_POINTS', key: 'rateLimitTokenPoints', type: 'int', default: 120, min: 1, max: 1e9, defaultText: '`120`', meaning: 'token requests per `api_key_id` and window (authenticated only)' },
  { env: 'RATE_LIMIT_TOKEN_WINDOW_SECONDS', key: 'rateLimitTokenWindowSeconds', type: 'int', default: 60, min: 1, max: 86_400, defaultText: '`60`', meaning: 'window of the token limit' },
  { env: 'RATE_LIMIT_AUTH_FAIL_POINTS', key: 'rateLimitAuthFailPoints', type: 'int', default: 20, min: 1, max: 1e9, defaultText: '`20`', meaning: 'failed authentications per client address and window' },
  { env: 'RATE_LIMIT_AUTH_FAIL_WINDOW_SECONDS', key: 'rateLimitAuthFailWindowSeconds', type: 'int', default: 60, min: 1, max: 86_400, defaultText: '`60`', meaning: 'window of the failure limit' },
  { env: 'ADMIN_AUTH_FAIL_POINTS', key: 'adminAuthFailPoints', type: 'int', default: 20, min: 1, max: 1e9, defaultText: '`20`', meaning: 'wrong admin tokens per client address and window; then 429 for the rest of the window, right token included' },
  { env: 'ADMIN_AUTH_FAIL_WINDOW_SECONDS', key: 'adminAuthFailWindowSeconds', type: 'int', default: 60, min: 1, max: 86_400, defaultText: '`60`', meaning: 'window of the admin token limit' },
  { env: 'TRUST_PROXY', key: 'trustProxy', type: 'bool', default: false, defaultText: '`false`', meaning: '`true` means `TRUST_PROXY_HOPS=1` (kept for existing deployments; `TRUST_PROXY_HOPS` wins when set)' },
  {
    env: 'TRUST_PROXY_HOPS', key: 'trustProxyHops', type: 'int', min: 0, max: 16,
    default: ({ values }) => (values.trustProxy ? 1 : 0),
    defaultText: '`1` with `TRUST_PROXY=true`, else `0`',
    meaning: 'proxies in front of the public port that append to `X-Forwarded-For`: the client is that many hops from the right (`0`: ignore the header); see docs/operations.md',
  },
  { env: 'TRUST_PROXY_CIDRS', key: 'trustProxyCidrs', type: 'string', default: '', defaultText: 'unset', meaning: 'comma-separated proxy addresses or ranges; when set, replaces the hop count: from a proxy, the client is the right-most hop outside these ranges' },
  { env: 'TRUST_PROXY_PEERS', key: 'trustProxyPeers', type: 'string', default: '', defaultText: 'loopback and private ranges', meaning: 'with `TRUST_PROXY_HOPS`: peers that may be the proxy; X-Forwarded-For from others is ignored (docs/operations.md)' },
  { env: 'KEY_ENCRYPTION_KEY', key: 'keyEncryptionKey', type: 'key32', defaultText: 'generated into `DATA_DIR/key-encryption-key` (0600)', meaning: '32 bytes (64 hex or base64) encrypting private signing keys' },
  { env: 'KEY_PROPAGATION_SECONDS', key: 'keyPropagationSeconds', type: 'int', default: 5, min: 0, max: 3600, defaultText: '`5`', meaning: 'a new key is published this long before it signs (≥ 2 × refresh)' },
  { env: 'KEY_REFRESH_SECONDS', key: 'keyRefreshSeconds', type: 'int', default: 1, min: 1, max: 60, defaultText: '`1`', meaning: 'how often each instance re-reads the key set' },
  { env: 'KEY_CLOCK_SKEW_SECONDS', key: 'keyClockSkewSeconds', type: 'int', default: 60, min: 0, max: 3600, defaultText: '`60`', meaning: 'a replaced key stays published for token TTL + this' },
  { env: 'KEY_ROTATION_INTERVAL_SECONDS', key: 'keyRotationIntervalSeconds', type: 'int', default: 0, min: 0, max: 10 * 365 * 86_400, defaultText: '`0` (off)', meaning: 'automatic rotation period' },
  { env: 'CACHE_TTL_SECONDS', key: 'cacheTtlSeconds', type: 'int', default: 300, min: 1, max: 86_400, defaultText: '`300`', meaning: 'Redis cache entries' },
  { env: 'LOCAL_CACHE_TTL_MS', key: 'localCacheTtlMs', type: 'int', default: 5000, min: 0, max: 3_600_000, defaultText: '`5000`', meaning: 'in-process cache (safety net behind pub/sub)' },
  { env: 'LOCAL_CACHE_MAX_ENTRIES', key: 'localCacheMaxEntries', type: 'int', default: 50_000, min: 0, max: 10_000_000, defaultText: '`50000`', meaning: 'in-process cache bound' },
  { env: 'VERIFIED_CACHE_TTL_SECONDS', key: 'verifiedCacheTtlSeconds', type: 'int', default: 900, min: 0, max: 86_400, defaultText: '`900`', meaning: 'memory of verified secrets (HMACs)' },
  { env: 'CLIENT_ASSERTION_MAX_LIFETIME_SECONDS', key: 'clientAssertionMaxLifetimeSeconds', type: 'int', default: 300, min: 30, max: 3600, defaultText: '`300`', meaning: 'private_key_jwt: longest exp - now of an assertion' },
  { env: 'WORKLOAD_TOKEN_MAX_LIFETIME_SECONDS', key: 'workloadTokenMaxLifetimeSeconds', type: 'int', default: 86_400, min: 60, max: 604_800, defaultText: '`86400`', meaning: 'workload identity: longest exp - now of a platform-issued token' },
  { env: 'CLIENT_ASSERTION_CLOCK_TOLERANCE_SECONDS', key: 'clientAssertionClockToleranceSeconds', type: 'int', default: 30, min: 0, max: 300, defaultText: '`30`', meaning: 'client assertions: tolerance of exp, nbf, iat' },
  { env: 'JWKS_URI_ALLOW_LOOPBACK', key: 'jwksUriAllowLoopback', type: 'bool', default: false, defaultText: '`false`', meaning: 'agents\' and issuers\' jwks_uri may be http on loopback (development, tests)' },
  { env: 'JWKS_URI_ALLOW_PRIVATE', key: 'jwksUriAllowPrivate', type: 'bool', default: false, defaultText: '`false`', meaning: 'jwks_uri may resolve to private ranges (never to 0.0.0.0/8, ::/96 or forms of them)' },
  { env: 'JWKS_URI_TIMEOUT_MS', key: 'jwksUriTimeoutMs', type: 'int', default: 3000, min: 100, max: 30_000, defaultText: '`3000`', meaning: 'time bound of a jwks_uri fetch' },
  { env: 'JWKS_URI_CACHE_SECONDS', key: 'jwksUriCacheSeconds', type: 'int', default: 300, min: 0, max: 86_400, defaultText: '`300`', meaning: 'how long a fetched jwks_uri is used' },
  { env: 'JWKS_URI_COOLDOWN_SECONDS', key: 'jwksUriCooldownSeconds', type: 'int', default: 5, min: 0, max: 3600, defaultText: '`5`', meaning: 'an unknown kid fetches a jwks_uri again at once, at most this often' },
  { env: 'VERIFIED_CACHE_MAX_ENTRIES', key: 'verifiedCacheMaxEntries', type: 'int', default: 100_000, min: 0, max: 10_000_000, defaultText: '`100000`', meaning: 'bound of that memory' },
  { env: 'STORE_TIMEOUT_MS', key: 'storeTimeoutMs', type: 'int', default: 2000, min: 50, max: 60_000, defaultText: '`2000`', meaning: 'bound on every Postgres call; past it: 503 with `Retry-After`' },
  { env: 'ENRICHMENT_TIMEOUT_MS', key: 'enrichmentTimeoutMs', type: 'int', default: 100, min: 1, max: 10_000, defaultText: '`100`', meaning: 'budget for name/hostname in the platform listing' },
  { env: 'SHUTDOWN_DRAIN_SECONDS', key: 'shutdownDrainSeconds', type: 'int', default: 5, min: 0, max: 120, defaultText: '`5`', meaning: 'after SIGTERM: `/readyz` answers 503 at once while both listeners keep serving this long (answers say `Connection: close`), so balancers polling `/readyz` move off before the ports close; set it above their poll interval × unhealthy threshold' },
  { env: 'SHUTDOWN_TIMEOUT_MS', key: 'shutdownTimeoutMs', type: 'int', default: 10_000, min: 100, max: 300_000, defaultText: '`10000`', meaning: 'graceful drain bound' },
  { env: 'REVOCATION_ISSUED_SLACK_SECONDS', key: 'revocationIssuedSlackSeconds', type: 'int', default: 2, min: 0, max: 60, defaultText: '`2`', meaning: 'a revocation also voids tokens issued up to this long after it (instances not yet told)' },
  { env: 'CLOCK_SKEW_MAX_SECONDS', key: 'clockSkewMaxSeconds', type: 'int', default: 1, min: 1, max: 3600, defaultText: '`1`', meaning: 'skew to Postgres that stops issuing' },
  { env: 'REVOCATION_POLL_MS', key: 'revocationPollMs', type: 'int', default: 1000, min: 100, max: 60_000, defaultText: '`1000`', meaning: 'how often each process re-reads its feeds\' heads (lost pub/sub messages)' },
  { env: 'REVOCATION_HEARTBEAT_SECONDS', key: 'revocationHeartbeatSeconds', type: 'int', default: 5, min: 1, max: 300, defaultText: '`5`', meaning: 'how often the signed stream head is re-signed and pushed (staleAfterSeconds must exceed 1.5 × this)' },
  { env: 'REVOCATION_WS_MAX_PER_ADDRESS', key: 'revocationWsMaxPerAddress', type: 'int', default: 16, min: 1, max: 100_000, defaultText: '`16`', meaning: 'feed WebSockets per client address per process' },
  { env: 'REVOCATION_WS_MAX', key: 'revocationWsMax', type: 'int', default: 2048, min: 1, max: 1_000_000, defaultText: '`2048`', meaning: 'feed WebSockets per process' },
  { env: 'AUDIT', key: 'audit.enabled', type: 'bool', default: true, defaultText: '`true`', meaning: '`false` records no audit event (for comparison benchmarks only)' },
  { env: 'AUDIT_RETENTION_DAYS', key: 'audit.retentionDays', type: 'int', default: 90, min: 1, max: 36_500, defaultText: '`90`', meaning: 'days of audit events kept; older daily partitions are dropped (one replica at a time)' },
  { env: 'AUDIT_FLUSH_MS', key: 'audit.flushMs', type: 'int', default: 2, min: 0, max: 1000, defaultText: '`2`', meaning: 'group commit: delay before a batch leaves (0: the next event-loop turn); events that gathered during a write leave when it commits' },
  { env: 'AUDIT_BATCH_MAX', key: 'audit.batchMax', type: 'int', default: 1000, min: 1, max: 10_000, defaultText: '`1000`', meaning: 'group commit: events per statement' },
  { env: 'AUDIT_MAX_IN_FLIGHT', key: 'audit.maxInFlight', type: 'int', default: 1, min: 1, max: 64, defaultText: '`1`', meaning: 'group commit: statements in flight per process' },
  { env: 'AUDIT_WRITE_TIMEOUT_MS', key: 'audit.writeTimeoutMs', type: 'int', default: 1000, min: 50, max: 60_000, defaultText: '`1000`', meaning: 'a batch not committed in time goes to the spool' },
  { env: 'AUDIT_SPOOL_MAX_BYTES', key: 'audit.spoolMaxBytes', type: 'int', default: 1024 ** 3, min: 0, max: 2 ** 50, defaultText: '1 GiB', meaning: 'spool bound in `DATA_DIR` (beyond it tokens get 503)' },
  { env: 'AUDIT_DRAIN_INTERVAL_MS', key: 'audit.drainIntervalMs', type: 'int', default: 1000, min: 50, max: 60_000, defaultText: '`1000`', meaning: 'how often a spooling process probes Postgres to drain the spool' },
  { env: 'AUDIT_POOL_SIZE', key: 'audit.poolSize', type: 'int', default: 3, min: 1, max: 64, defaultText: '`3` (2 embedded)', meaning: "the trail's own Postgres connections" },
  { env: 'AUDIT_REFUSALS_PER_WINDOW', key: 'audit.refusalsPerWindow', type: 'int', default: 20, min: 1, max: 100_000, defaultText: '`20`', meaning: '`token.refused` rows per address and per agent in a window; beyond, aggregated (docs/audit.md)' },
  { env: 'AUDIT_REFUSAL_WINDOW_SECONDS', key: 'audit.refusalWindowSeconds', type: 'int', default: 60, min: 1, max: 3600, defaultText: '`60`', meaning: 'the window of `AUDIT_REFUSALS_PER_WINDOW`' },
  { env: 'AUDIT_MAINTENANCE_INTERVAL_SECONDS', key: 'audit.maintenanceIntervalSeconds', type: 'int', default: 3600, min: 1, max: 86_400, defaultText: '`3600`', meaning: 'partition creation and retention round' },
  { env: 'LOG_LEVEL', key: 'logLevel', type: 'oneOf', default: 'info', allowed: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], defaultText: '`info`', meaning: 'pino level' },
  { env: 'ACCESS_LOG', key: 'accessLog', type: 'bool', default: false, defaultText: '`false`', meaning: 'one JSON line per request (request id, route, status, ms)' },
];

/** The README's configuration table, rendered from SETTINGS (scripts/settings-table.mjs writes it). */
export function settingsTable(): string {
  const rows = SETTINGS.map((s) => `| \`${s.env}\` | ${s.defaultText} | ${s.meaning}${bounds(s)} |`);
  return ['| variable | default | meaning |', '|---|---|---|', ...rows].join('\n');
}

function bounds(s: Setting): string {
  if (s.type === 'int') return `; ${s.min}–${s.max}`;
  if (s.type === 'oneOf') return `: ${s.allowed.map((a) => `\`${a}\``).join(', ')}`;
  return '';
}
