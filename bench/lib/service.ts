// Starts the compiled service (dist/src/main.js) for the benchmark: free loopback ports, a fresh Postgres
// database `ace_bench_<random>` and a unique Redis key prefix (or the embedded default), waits for
// GET <admin>/readyz = 200, and cleans everything up afterwards. Own code on purpose: bench/ is compiled
// and must not import test/ (which is not).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { Redis } from 'ioredis';

export const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src/main.js');

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

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
}

export async function startBenchService(options: StartOptions): Promise<BenchService> {
  const useRedis = !options.embedded && options.redis !== false;
  const redisUrl = options.redisUrl ?? REDIS_URL;
  const [port, adminPort] = [await freePort(), await freePort()];
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ace-bench-'));
  const adminToken = randomBytes(24).toString('hex');
  let databaseName: string | undefined;
  let databaseUrl: string | undefined;
  let redisKeyPrefix: string | undefined;
  if (!options.embedded) {
    databaseName = `ace_bench_${randomBytes(6).toString('hex')}`;
    const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
    try {
      await admin.unsafe(`CREATE DATABASE ${databaseName}`);
    } finally {
      await admin.end();
    }
    databaseUrl = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${databaseName}`);
    if (useRedis) redisKeyPrefix = `ace-bench-${randomBytes(4).toString('hex')}:`;
  }

  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    UV_THREADPOOL_SIZE: String(options.uvThreads),
    HOST: '127.0.0.1',
    PORT: String(port),
    ADMIN_HOST: '127.0.0.1',
    ADMIN_PORT: String(adminPort),
    ADMIN_TOKEN: adminToken,
    DATA_DIR: dataDir,
    // info: the start-up lines tell when every cluster worker is up; nothing is logged per request.
    LOG_LEVEL: 'info',
    ACCESS_LOG: 'false',
    KEY_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
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
    ...(options.embedded ? {} : { DATABASE_URL: databaseUrl! }),
    ...(useRedis ? { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: redisKeyPrefix! } : {}),
    // WORKERS, ARGON2_THREADS and SIGN_THREADS stay at the service's defaults; the bench reads how many
    // HTTP processes really started from the start-up log.
    // For profiling any scenario's service (e.g. BENCH_SERVICE_NODE_OPTIONS=--perf-basic-prof, then perf).
    ...(process.env.BENCH_SERVICE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_SERVICE_NODE_OPTIONS } : {}),
    ...options.env,
  };

  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), MAIN], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer) => {
    output += chunk;
    if (output.length > 200_000) output = output.slice(-100_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  let disposed = false;
  const service: BenchService = {
    publicUrl: `http://127.0.0.1:${port}`,
    adminUrl: `http://127.0.0.1:${adminPort}`,
    adminToken,
    pid: child.pid!,
    httpProcesses: 0,
    databaseUrl,
    redisKeyPrefix,
    output: () => output,
    async dispose() {
      if (disposed) return;
      disposed = true;
      await stopChild(child, exited);
      if (databaseName) {
        const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
        await admin.unsafe(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`).catch(() => {});
        await admin.end();
      }
      if (redisKeyPrefix) await deleteRedisPrefix(redisUrl, redisKeyPrefix).catch(() => {});
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  try {
    await waitUntilReady(service, child, exited);
    service.httpProcesses = await waitForHttpProcesses(service);
  } catch (error) {
    await service.dispose();
    throw error;
  }
  return service;
}

async function stopChild(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

async function waitUntilReady(service: BenchService, child: ChildProcess, exited: Promise<void>): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (gone) throw new Error(`service exited before it was ready (code ${child.exitCode}):\n${service.output().slice(-4000)}`);
    try {
      const response = await fetch(`${service.adminUrl}/readyz`);
      await response.arrayBuffer();
      if (response.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`service not ready within 60 s:\n${service.output().slice(-4000)}`);
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
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function deleteRedisPrefix(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  await redis.connect();
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}
