// Test harness: starts the compiled service (dist/src/main.js) as a child process on free ports against
// real Postgres and Redis on 127.0.0.1 (mode "real") or on the embedded default (mode "embedded").
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { childrenOf } from '../../kit/proc.js';
import { createDatabase as createScratchDatabase, redisKeyPrefix, type ScratchDatabase } from '../../kit/stores.js';
import { DIST, serviceAddresses, spawnService, waitUntilReady, type Exit } from '../../kit/service.js';

export const PG_ADMIN_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const FAULT_HOOKS = path.join(DIST, 'test/support/fault-hooks.js');
const CLOCK_OFFSET = path.join(DIST, 'test/support/clock-offset.js');

export type TestDatabase = ScratchDatabase;

/** A fresh, empty database on the real Postgres server. */
export function createDatabase(): Promise<TestDatabase> {
  return createScratchDatabase(PG_ADMIN_URL, 'ace_test');
}

export interface StartOptions {
  mode: 'real' | 'embedded';
  /** Extra environment; wins over the defaults below. */
  env?: Record<string, string>;
  /** Share a database between instances (mode "real"); a fresh one is made when omitted. */
  database?: TestDatabase;
  /** Share a data directory (mode "embedded", or the generated key-encryption key). */
  dataDir?: string;
  /** Share a Redis key prefix between instances (mode "real"); a fresh one is made when omitted. */
  redisKeyPrefix?: string;
  /**
   * Test only: run the crypto workers with fault injection (test/support/fault-worker.ts, loaded through a
   * module hook; the shipped worker has none). The secret "fault:crash" ends an argon2 thread, "fault:hang"
   * wedges it.
   */
  faultWorker?: boolean;
  /** Test only: the service's wall clock runs this far ahead (negative: behind) of the machine's (clock-offset.ts). */
  clockOffsetMs?: number;
  /** Test only: the offset is read from this file, again every 100 ms (write another number to move the clock). */
  clockOffsetFile?: string;
  /**
   * Run the service under this command prefix (e.g. strace and its options). Signals from `stop` go to
   * the service process itself, the wrapper's child, not to the wrapper.
   */
  wrapWith?: string[];
  /** Another build's entry point (the previous release's dist/src/main.js); this build's when omitted. */
  main?: string;
}

export interface ServiceHandle {
  publicUrl: string;
  adminUrl: string;
  adminToken: string;
  env: Record<string, string>;
  database?: TestDatabase;
  dataDir: string;
  process: ChildProcess;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  /** Sends a signal and waits for exit. */
  stop(signal?: NodeJS.Signals): Promise<Exit>;
  /** Stops the process and drops the database it created. */
  dispose(): Promise<void>;
}

/**
 * Starts the service; when it refuses its ports because another process took one between our probe and
 * its listen (test files run in parallel), it is started again on other ports.
 */
export async function startService(options: StartOptions): Promise<ServiceHandle> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options);
    } catch (error) {
      if (attempt >= 3 || !/in use by another process/.test((error as Error).message) || options.env?.PORT || options.env?.ADMIN_PORT) throw error;
    }
  }
}

async function startOnce(options: StartOptions): Promise<ServiceHandle> {
  // The production build (npm run build) no longer compiles test helpers: say which command does.
  if (options.faultWorker && !existsSync(FAULT_HOOKS)) throw new Error(`${FAULT_HOOKS} is missing: run \`npm run build:test\` (npm test does)`);
  const addresses = await serviceAddresses();
  const ownDataDir = options.dataDir === undefined;
  const dataDir = options.dataDir ?? mkdtempSync(path.join(os.tmpdir(), 'ace-test-'));
  const ownDatabase = options.mode === 'real' && !options.database ? await createDatabase() : undefined;
  const database = options.database ?? ownDatabase;
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    ...addresses.env,
    DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
    KEY_ENCRYPTION_KEY: '11'.repeat(32),
    ARGON2_THREADS: '1',
    SIGN_THREADS: '1',
    // No drain after SIGTERM unless a test asks for one: suites stop services often.
    SHUTDOWN_DRAIN_SECONDS: '0',
    ...(options.mode === 'real'
      ? {
          DATABASE_URL: database!.url,
          REDIS_URL,
          REDIS_KEY_PREFIX: options.redisKeyPrefix ?? redisKeyPrefix('ace-test'),
          WORKERS: '1',
        }
      : {}),
    ...(options.clockOffsetMs ? { ACE_TEST_CLOCK_OFFSET_MS: String(options.clockOffsetMs) } : {}),
    ...(options.clockOffsetFile ? { ACE_TEST_CLOCK_OFFSET_FILE: options.clockOffsetFile } : {}),
    ...options.env,
  };
  const nodeArgs = [...(options.faultWorker ? ['--import', FAULT_HOOKS] : []), ...(options.clockOffsetMs || options.clockOffsetFile ? ['--import', CLOCK_OFFSET] : [])];
  const service = spawnService({ env, nodeArgs, wrapWith: options.wrapWith, main: options.main });
  const child = service.child;
  const wrapped = (options.wrapWith ?? []).length > 0;
  // With a wrapper, the service is the wrapper's child: that is the process to signal.
  const servicePid = (): number | undefined => (wrapped ? childrenOf(child.pid!)[0] : child.pid);
  const handle: ServiceHandle = {
    publicUrl: `http://127.0.0.1:${env.PORT}`,
    adminUrl: `http://127.0.0.1:${env.ADMIN_PORT}`,
    adminToken: env.ADMIN_TOKEN,
    env,
    database,
    dataDir,
    process: child,
    output: service.output,
    /** Stops the process; resolves once it exited and its output has been read to the end. */
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) {
        const pid = servicePid();
        if (pid !== undefined && pid !== child.pid) process.kill(pid, signal);
        else child.kill(signal);
      }
      const exit = await service.exited;
      // Cluster workers that outlive a killed primary may hold the pipes open, hence the bound.
      await Promise.race([service.drained, new Promise((r) => setTimeout(r, 5000).unref())]);
      return exit;
    },
    async dispose() {
      await handle.stop('SIGKILL');
      await ownDatabase?.drop();
      // An embedded database weighs ~40 MB: leave nothing behind in the temp folder.
      if (ownDataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
  try {
    await waitUntilReady(handle.adminUrl, service);
  } catch (error) {
    await handle.dispose();
    throw error;
  }
  return handle;
}

/** Starts a process and resolves with its exit and output (for refusal-to-start tests). */
export async function runToExit(env: Record<string, string>, timeoutMs = 30_000): Promise<{ code: number | null; output: string }> {
  const service = spawnService({ env });
  const timer = setTimeout(() => service.child.kill('SIGKILL'), timeoutMs);
  const { code } = await service.exited;
  clearTimeout(timer);
  // Read the output to its end; bounded, as a child left behind could hold the pipes open.
  await Promise.race([service.drained, new Promise((r) => setTimeout(r, 5000).unref())]);
  return { code, output: service.output() };
}
