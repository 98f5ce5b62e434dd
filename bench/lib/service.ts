// Starts the compiled service (dist/src/main.js) for the benchmark: free loopback ports, a fresh Postgres
// database `ace_bench_<random>` and a unique Redis key prefix (or the embedded default), waits for
// GET <admin>/readyz = 200, and cleans everything up afterwards. The process handling is the kit's
// (kit/service.ts, shared with the tests); the environment here is tuned for measuring.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { stopProcess } from '../../kit/proc.js';
import { serviceAddresses, spawnService, waitUntilReady } from '../../kit/service.js';
import { createDatabase, deleteRedisKeys, redisKeyPrefix as freshKeyPrefix, type ScratchDatabase } from '../../kit/stores.js';
import { sleep } from '../../kit/wait.js';

export const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A service the bench talks to: one it started, or a deployed one (--target). */
export interface ServiceTarget {
  publicUrl: string;
  adminUrl: string;
  adminToken: string;
}

export interface BenchService extends ServiceTarget {
  pid: number;
  /** HTTP processes that reported ready (read from the service's own start-up log). */
  httpProcesses: number;
  /** Postgres URL of the bench database (undefined when embedded). */
  databaseUrl: string | undefined;
  redisKeyPrefix: string | undefined;
  output(): string;
  /** SIGTERM (SIGKILL after 15 s), then drops the database, the Redis keys and the data directory. */
  dispose(): Promise<void>;
}

export interface StartOptions {
  embedded: boolean;
  /** libuv thread pool size, given explicitly so the peer and the bare servers get the same. */
  uvThreads: number;
  env?: Record<string, string>;
  /** false: no REDIS_URL even on Postgres (in-process caches and limiter, one process). */
  redis?: boolean;
  redisUrl?: string;
  /** Extra node flags for the service process (e.g. --cpu-prof for profiling). */
  nodeArgs?: string[];
  /** Server on which the fresh database is created (a URL of any database there); default PG_ADMIN_URL. */
  pgAdminUrl?: string;
  /**
   * The DATABASE_URL the service gets, from the fresh database (e.g. the same database through a pooler,
   * or a multi-host URL); default its direct URL. `databaseUrl` of the handle stays the direct URL.
   */
  serviceDatabaseUrl?: (database: ScratchDatabase) => string;
  /**
   * The Redis topology's settings instead of REDIS_URL (e.g. REDIS_SENTINELS + REDIS_SENTINEL_MASTER, or
   * REDIS_CLUSTER_NODES); the key prefix is still set. Its keys are not swept at dispose: such a Redis is
   * the bench's own and thrown away with its topology.
   */
  redisEnv?: Record<string, string>;
  /**
   * Another instance of one deployment: its database, Redis key prefix and key-encryption key, which this
   * service uses and never drops (the caller owns them; see `sharedStores`).
   */
  shared?: SharedStores;
}

/** What the instances of one deployment share; made by `sharedStores`, dropped by its `drop`. */
export interface SharedStores {
  database: ScratchDatabase;
  redisKeyPrefix: string;
  keyEncryptionKey: string;
  drop(): Promise<void>;
}

/** A database, a Redis key prefix and a key-encryption key for several instances (a rolling restart). */
export async function sharedStores(): Promise<SharedStores> {
  const database = await createDatabase(PG_ADMIN_URL, 'ace_bench');
  const redisKeyPrefix = freshKeyPrefix('ace-bench');
  return {
    database,
    redisKeyPrefix,
    keyEncryptionKey: randomBytes(32).toString('hex'),
    async drop() {
      await database.drop().catch((error) => process.stderr.write(`bench: could not drop ${database.name}: ${error}\n`));
      await deleteRedisKeys(REDIS_URL, redisKeyPrefix).catch((error) => process.stderr.write(`bench: could not delete ${redisKeyPrefix}*: ${error}\n`));
    },
  };
}

export async function startBenchService(options: StartOptions): Promise<BenchService> {
  const useRedis = !options.embedded && options.redis !== false;
  const redisUrl = options.redisUrl ?? REDIS_URL;
  const addresses = await serviceAddresses();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ace-bench-'));
  const { shared } = options;
  const database: ScratchDatabase | undefined = options.embedded ? undefined : (shared?.database ?? (await createDatabase(options.pgAdminUrl ?? PG_ADMIN_URL, 'ace_bench')));
  const redisKeyPrefix = useRedis ? (shared?.redisKeyPrefix ?? freshKeyPrefix('ace-bench')) : undefined;
  const redisEnv = options.redisEnv ?? { REDIS_URL: redisUrl };

  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    UV_THREADPOOL_SIZE: String(options.uvThreads),
    ...addresses.env,
    DATA_DIR: dataDir,
    // info: the start-up lines tell when every cluster worker is up; nothing is logged per request.
    LOG_LEVEL: 'info',
    ACCESS_LOG: 'false',
    KEY_ENCRYPTION_KEY: shared?.keyEncryptionKey ?? randomBytes(32).toString('hex'),
    // Limits must not shape the figures: the bench measures capacity, not the limiter.
    RATE_LIMIT_TOKEN_POINTS: '1000000',
    RATE_LIMIT_AUTH_FAIL_POINTS: '1000000',
    // All the bench's load comes from one address (127.0.0.1); the per-address share of the argon2 queue
    // (ARGON2_MAX_PER_ADDRESS, default queue / 16 = 4) would turn cold requests into instant 429s. The
    // fleet scenario keeps the default and gives each agent its own address instead (X-Forwarded-For).
    // Room for twice the default 64 connections: when a run ends, checks already running for its closed
    // connections finish on their threads (and hold the address's share) while the next run opens its own.
    ARGON2_MAX_QUEUE: '128',
    ARGON2_MAX_PER_ADDRESS: '128',
    // No balancer in front: a stopped bench service need not serve on after SIGTERM (a scenario that
    // stops instances under load sets SHUTDOWN_DRAIN_SECONDS itself).
    SHUTDOWN_DRAIN_SECONDS: '0',
    ...(database ? { DATABASE_URL: options.serviceDatabaseUrl?.(database) ?? database.url } : {}),
    ...(useRedis ? { ...redisEnv, REDIS_KEY_PREFIX: redisKeyPrefix! } : {}),
    // WORKERS, ARGON2_THREADS and SIGN_THREADS stay at the service's defaults; the bench reads how many
    // HTTP processes really started from the start-up log.
    // For profiling any scenario's service (e.g. BENCH_SERVICE_NODE_OPTIONS=--perf-basic-prof, then perf).
    ...(process.env.BENCH_SERVICE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_SERVICE_NODE_OPTIONS } : {}),
    ...options.env,
  };

  const spawned = spawnService({ env, nodeArgs: options.nodeArgs, maxOutput: 200_000 });
  const child = spawned.child;

  let disposed = false;
  const service: BenchService = {
    publicUrl: addresses.publicUrl,
    adminUrl: addresses.adminUrl,
    adminToken: addresses.adminToken,
    pid: child.pid!,
    httpProcesses: 0,
    databaseUrl: database?.url,
    redisKeyPrefix,
    output: spawned.output,
    async dispose() {
      if (disposed) return;
      disposed = true;
      await stopProcess(child, { signal: 'SIGTERM', killAfterMs: 15_000 });
      if (shared) return rmSync(dataDir, { recursive: true, force: true });
      // Best effort, and said so: a leftover scratch database or key prefix must not fail the run.
      await database?.drop().catch((error) => process.stderr.write(`bench: could not drop ${database.name}: ${error}\n`));
      if (redisKeyPrefix && !options.redisEnv) {
        await deleteRedisKeys(redisUrl, redisKeyPrefix).catch((error) => process.stderr.write(`bench: could not delete ${redisKeyPrefix}*: ${error}\n`));
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  try {
    await waitUntilReady(service.adminUrl, spawned);
    service.httpProcesses = await waitForHttpProcesses(service);
  } catch (error) {
    await service.dispose();
    throw error;
  }
  return service;
}

const READY_MSG = 'agent credential exchange ready';

/** The `workers` count each ready line states, and how many ready lines there are (pino JSON lines). */
export function readyLines(output: string): { expected: number | undefined; ready: number } {
  let expected: number | undefined;
  let ready = 0;
  for (const line of output.split('\n')) {
    if (!line.includes(READY_MSG)) continue;
    ready++;
    try {
      const workers = (JSON.parse(line) as { workers?: unknown }).workers;
      if (typeof workers === 'number') expected = workers;
    } catch {
      // not a JSON line: counts as ready, states nothing
    }
  }
  return { expected, ready };
}

/**
 * readyz turns 200 as soon as one HTTP process is up (they share the port); every HTTP process logs one
 * ready line stating the configured process count (WORKERS), so wait for that many lines. A process that
 * never reports ready within 30 s fails the run (the figures would be wrong), it is not just a warning.
 */
async function waitForHttpProcesses(service: BenchService): Promise<number> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const { expected, ready } = readyLines(service.output());
    if (expected !== undefined && ready >= expected) return expected;
    if (Date.now() > deadline) throw new Error(`${ready} of ${expected ?? '?'} HTTP processes reported ready within 30 s:\n${service.output().slice(-2000)}`);
    await sleep(50);
  }
}
