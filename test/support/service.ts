// Test harness: starts the compiled service (dist/src/main.js) as a child process on free ports against
// real Postgres and Redis on 127.0.0.1 (mode "real") or on the embedded default (mode "embedded").
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { childrenOf } from './proc.js';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';

export const PG_ADMIN_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const DIST = path.resolve(import.meta.dirname ?? path.dirname(new URL(import.meta.url).pathname), '../../dist');
const MAIN = path.join(DIST, 'src/main.js');
const FAULT_HOOKS = path.join(DIST, 'test/support/fault-hooks.js');

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

export interface TestDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/** A fresh, empty database on the real Postgres server. */
export async function createDatabase(): Promise<TestDatabase> {
  const name = `ace_test_${randomBytes(6).toString('hex')}`;
  const sql = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
  await sql.unsafe(`CREATE DATABASE ${name}`);
  await sql.end();
  const url = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`);
  return {
    name,
    url,
    async drop() {
      const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
      await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
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
  /**
   * Run the service under this command prefix (e.g. strace and its options). Signals from `stop` go to
   * the service process itself, the wrapper's child, not to the wrapper.
   */
  wrapWith?: string[];
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
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Stops the process and drops the database it created. */
  dispose(): Promise<void>;
}

export async function startService(options: StartOptions): Promise<ServiceHandle> {
  const [port, adminPort] = [await freePort(), await freePort()];
  const ownDataDir = options.dataDir === undefined;
  const dataDir = options.dataDir ?? mkdtempSync(path.join(os.tmpdir(), 'ace-test-'));
  const ownDatabase = options.mode === 'real' && !options.database ? await createDatabase() : undefined;
  const database = options.database ?? ownDatabase;
  const adminToken = randomBytes(24).toString('hex');
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOST: '127.0.0.1',
    PORT: String(port),
    ADMIN_HOST: '127.0.0.1',
    ADMIN_PORT: String(adminPort),
    ADMIN_TOKEN: adminToken,
    DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
    KEY_ENCRYPTION_KEY: '11'.repeat(32),
    ARGON2_THREADS: '1',
    SIGN_THREADS: '1',
    ...(options.mode === 'real'
      ? {
          DATABASE_URL: database!.url,
          REDIS_URL,
          REDIS_KEY_PREFIX: options.redisKeyPrefix ?? `ace-test-${randomBytes(4).toString('hex')}:`,
          WORKERS: '1',
        }
      : {}),
    ...options.env,
  };
  const args = options.faultWorker ? ['--import', FAULT_HOOKS, MAIN] : [MAIN];
  const wrap = options.wrapWith ?? [];
  const child = wrap.length > 0
    ? spawn(wrap[0], [...wrap.slice(1), process.execPath, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  // With a wrapper, the service is the wrapper's child: that is the process to signal.
  const servicePid = (): number | undefined => (wrap.length > 0 ? childrenOf(child.pid!)[0] : child.pid);
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  // Everything the process wrote has been read once both pipes close. Cluster workers that outlive a
  // killed primary may hold them open, hence the bound.
  const drained = Promise.all([once(child.stdout!, 'close'), once(child.stderr!, 'close')]);
  const handle: ServiceHandle = {
    publicUrl: `http://127.0.0.1:${env.PORT}`,
    adminUrl: `http://127.0.0.1:${env.ADMIN_PORT}`,
    adminToken: env.ADMIN_TOKEN,
    env,
    database,
    dataDir,
    process: child,
    output: () => output,
    /** Stops the process; resolves once it exited and its output has been read to the end. */
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) {
        const pid = servicePid();
        if (pid !== undefined && pid !== child.pid) process.kill(pid, signal);
        else child.kill(signal);
      }
      const exit = await exited;
      await Promise.race([drained, new Promise((r) => setTimeout(r, 5000).unref())]);
      return exit;
    },
    async dispose() {
      await handle.stop('SIGKILL');
      await ownDatabase?.drop();
      // An embedded database weighs ~40 MB: leave nothing behind in the temp folder.
      if (ownDataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
  await waitUntilReady(handle, exited);
  return handle;
}

async function waitUntilReady(handle: ServiceHandle, exited: Promise<unknown>): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (gone) throw new Error(`service exited before it was ready:\n${handle.output()}`);
    try {
      const response = await fetch(`${handle.adminUrl}/readyz`);
      if (response.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await handle.stop('SIGKILL');
  throw new Error(`service not ready within 60 s:\n${handle.output()}`);
}

/** Starts a process and resolves with its exit and output (for refusal-to-start tests). */
export async function runToExit(env: Record<string, string>, timeoutMs = 30_000): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [MAIN], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (c) => (output += c));
  child.stderr!.on('data', (c) => (output += c));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, output };
}
