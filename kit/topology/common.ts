// Shared plumbing of the topology kit: loopback ports below 32768, private temp folders, child processes
// started by PID (as the `postgres` user when we are root: Postgres and PgBouncer refuse to run as root),
// bounded condition waits, and a registry so that stopAll() (and, as a last resort, process exit) tears
// everything down even when a test failed half-way.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { processTree } from '../proc.js';
import { pickPort } from '../ports.js';
import { pollFor as poll, WaitTimeoutError as TopologyTimeoutError } from '../wait.js';

export { pickPort, portIsFree } from '../ports.js';

export const PG_BIN = process.env.TOPOLOGY_PG_BIN ?? '/usr/lib/postgresql/15/bin';
export const HOST = '127.0.0.1';

/** uid/gid to run Postgres and PgBouncer as: the `postgres` user when we are root, else ourselves. */
export function serviceUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const res = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (res.status !== 0 || gid.status !== 0) throw new Error('topology: running as root but there is no `postgres` user to run Postgres/PgBouncer as');
  return { uid: Number(res.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

// ---------------------------------------------------------------------------------------------- waits

export { TopologyTimeoutError };

/** kit/wait.ts's pollFor, ended at once by a process of the topology that died (its log says why). */
export function pollFor<T>(what: string, check: () => Promise<T | undefined | false> | T | undefined | false, options: { timeoutMs?: number; intervalMs?: number } = {}): Promise<T> {
  return poll(what, check, { ...options, fatal: (error) => error instanceof ProcessExitedError });
}

// ------------------------------------------------------------------------------------------ temp dirs

/** A fresh temp folder, owned by the service user when we are root (Postgres insists on owning its data). */
export function makeTempDir(prefix: string, owner?: { uid: number; gid: number }): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), `ace-topology-${prefix}-`));
  if (owner) chownSync(dir, owner.uid, owner.gid);
  registry.dirs.add(dir);
  return dir;
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  registry.dirs.delete(dir);
}

// ------------------------------------------------------------------------------------------ processes

/** A long-running child process started by the kit; its output goes to `logFile`. */
export class Proc {
  readonly child: ChildProcess;
  readonly pid: number;
  exited = false;
  exitCode: number | null = null;
  signal: NodeJS.Signals | null = null;
  /** Set when the binary could not be run at all (e.g. ENOENT: the package is not installed). */
  spawnError: Error | undefined;
  private readonly exitPromise: Promise<void>;

  constructor(
    readonly name: string,
    readonly command: string,
    readonly args: string[],
    readonly logFile: string,
    opts: { user?: { uid: number; gid: number }; cwd?: string; env?: NodeJS.ProcessEnv } = {},
  ) {
    const fd = openSync(logFile, 'a');
    if (opts.user) chownSync(logFile, opts.user.uid, opts.user.gid);
    try {
      this.child = spawn(command, args, {
        cwd: opts.cwd,
        env: { ...process.env, ...(opts.user ? { HOME: opts.cwd ?? os.tmpdir(), USER: 'postgres', LOGNAME: 'postgres' } : {}), ...opts.env },
        stdio: ['ignore', fd, fd],
        uid: opts.user?.uid,
        gid: opts.user?.gid,
      });
    } finally {
      closeSync(fd);
    }
    if (this.child.pid === undefined) throw new Error(`topology: could not start ${name} (${command})`);
    this.pid = this.child.pid;
    this.exitPromise = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.exited = true;
        this.exitCode = code;
        this.signal = signal;
        registry.procs.delete(this);
        resolve();
      });
      // A spawn error (binary missing) also ends the process as far as we are concerned.
      this.child.once('error', (err) => {
        this.spawnError = err;
        this.exited = true;
        registry.procs.delete(this);
        resolve();
      });
    });
    registry.procs.add(this);
  }

  /** The last lines of the log, for error messages. */
  logTail(lines = 15): string {
    if (!existsSync(this.logFile)) return '';
    return readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  }

  /** Throws (with the log tail) if the process has already ended: used inside waits to fail fast. */
  assertRunning(): void {
    if (this.spawnError) {
      const message = `topology: could not run ${this.command} for ${this.name}: ${this.spawnError.message}`;
      throw new ProcessExitedError(message, message);
    }
    if (this.exited) {
      throw new ProcessExitedError(
        `topology: ${this.name} exited (code ${this.exitCode}, signal ${this.signal}) before it was ready; log ${this.logFile}:\n${this.logTail()}`,
        this.logTail(50),
      );
    }
  }

  /** Resolves when the process has exited; throws after timeoutMs. */
  async waitExit(timeoutMs = 30_000): Promise<void> {
    if (this.exited) return;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new TopologyTimeoutError(`topology: ${this.name} (pid ${this.pid}) did not exit within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([this.exitPromise, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Sends `signal`; waits for the exit, then SIGKILLs the process and what it left behind if needed. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 15_000): Promise<void> {
    if (this.exited) return;
    const descendants = processTree(this.pid).slice(1);
    this.child.kill(signal);
    try {
      await this.waitExit(timeoutMs);
    } catch {
      // Graceful stop overran: fall through to the hard kill below (that is what the timeout is for).
      this.child.kill('SIGKILL');
      await this.waitExit(5_000);
    }
    await killAndWait(descendants);
  }

  /** SIGKILL the process and every descendant (a crash: Postgres backends must not outlive it). */
  async kill(): Promise<void> {
    if (this.exited) return;
    const descendants = processTree(this.pid).slice(1);
    this.child.kill('SIGKILL');
    await killAndWait(descendants);
    await this.waitExit(10_000);
  }
}

export class ProcessExitedError extends Error {
  constructor(message: string, readonly log: string) {
    super(message);
  }
}

function alive(pid: number): boolean {
  try {
    // A zombie still answers kill(0); it holds no port or file, so it counts as gone.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

async function killAndWait(pids: number[]): Promise<void> {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone: nothing to kill
    }
  }
  await pollFor(`processes ${pids.join(',')} to be gone`, () => pids.every((p) => !alive(p)), { timeoutMs: 10_000, intervalMs: 50 });
}

/** Runs a short command to completion (as the service user when given); throws with its output on failure. */
export async function run(
  command: string,
  args: string[],
  opts: { user?: { uid: number; gid: number }; cwd?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<string> {
  const child = spawn(command, args, {
    cwd: opts.cwd,
    env: { ...process.env, ...(opts.user ? { HOME: opts.cwd ?? os.tmpdir(), USER: 'postgres', LOGNAME: 'postgres' } : {}), ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    uid: opts.user?.uid,
    gid: opts.user?.gid,
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (c, s) => resolve([c, s]));
  }).finally(() => clearTimeout(timer));
  if (code !== 0) {
    const why = signal === 'SIGKILL' ? `killed after ${timeoutMs} ms` : `exit ${code ?? signal}`;
    throw new Error(`topology: \`${command} ${args.join(' ')}\` failed (${why}):\n${out.trim()}`);
  }
  return out;
}

// ------------------------------------------------------------------------------------------- registry

/** A handle returned by one of the start functions: destroy() stops it and removes its folders. */
export interface Stoppable {
  destroy(): Promise<void>;
}

const registry = {
  procs: new Set<Proc>(),
  dirs: new Set<string>(),
  handles: [] as Stoppable[],
};

export function registerHandle(handle: Stoppable): void {
  registry.handles.push(handle);
}

export function unregisterHandle(handle: Stoppable): void {
  const i = registry.handles.indexOf(handle);
  if (i >= 0) registry.handles.splice(i, 1);
}

/**
 * Stops everything the kit started in this process, newest first, then removes what is left (processes
 * by PID, temp folders). Call it from afterAll: it never throws until it has tried everything.
 */
export async function stopAll(): Promise<void> {
  const errors: unknown[] = [];
  for (const handle of [...registry.handles].reverse()) {
    try {
      await handle.destroy();
    } catch (err) {
      errors.push(err);
    }
  }
  registry.handles.length = 0;
  for (const proc of [...registry.procs]) {
    try {
      await proc.kill();
    } catch (err) {
      errors.push(err);
    }
  }
  for (const dir of [...registry.dirs]) removeDir(dir);
  if (errors.length) throw new AggregateError(errors, `topology: stopAll hit ${errors.length} error(s)`);
}

/** What is still running / on disk: for tests asserting there are no leftovers. */
export function leftovers(): { pids: number[]; dirs: string[] } {
  return { pids: [...registry.procs].map((p) => p.pid), dirs: [...registry.dirs] };
}

// Last resort if a test file dies without its afterAll: no process or folder outlives the test process.
process.once('exit', () => {
  for (const proc of registry.procs) {
    for (const pid of processTree(proc.pid).slice(1)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    proc.child.kill('SIGKILL');
  }
  for (const dir of registry.dirs) rmSync(dir, { recursive: true, force: true });
});

/** True when a start failure was the port being taken (a race with another process): worth a new port. */
export function portWasTaken(err: unknown): boolean {
  return err instanceof ProcessExitedError && /address already in use|could not bind|Could not create server TCP listening socket/i.test(err.log);
}

/**
 * Starts something on an auto-picked port, retrying with a fresh port if another process grabbed the
 * port between our check and the bind. An explicitly given port is used once, as is.
 */
export async function withPort<T>(given: number | undefined, start: (port: number) => Promise<T>): Promise<T> {
  if (given !== undefined) return start(given);
  for (let attempt = 1; ; attempt++) {
    const port = await pickPort();
    try {
      return await start(port);
    } catch (err) {
      if (attempt >= 3 || !portWasTaken(err)) throw err;
    }
  }
}
