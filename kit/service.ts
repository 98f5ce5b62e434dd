// Starting the compiled service (dist/src/main.js) as a child process: the part the test harness
// (test/support/service.ts) and the bench (bench/lib/service.ts) share. Each adds its own environment
// (test defaults, bench tuning) and clean-up around it.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './ports.js';
import { waitFor } from './wait.js';

/** The repository: the nearest folder above this file with a package.json (kit/ runs as .ts and from dist/kit/). */
export const REPO_ROOT = (() => {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
  return dir;
})();
export const DIST = path.join(REPO_ROOT, 'dist');
export const SERVICE_MAIN = path.join(DIST, 'src/main.js');

/** Free loopback ports and a fresh admin token for one service, as its environment and its URLs. */
export async function serviceAddresses() {
  const [port, adminPort] = [await freePort(), await freePort()];
  const adminToken = randomBytes(24).toString('hex');
  return {
    publicUrl: `http://127.0.0.1:${port}`,
    adminUrl: `http://127.0.0.1:${adminPort}`,
    adminToken,
    env: { HOST: '127.0.0.1', PORT: String(port), ADMIN_HOST: '127.0.0.1', ADMIN_PORT: String(adminPort), ADMIN_TOKEN: adminToken },
  };
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ServiceProcess {
  child: ChildProcess;
  /** What the process wrote to stdout and stderr so far (the last `maxOutput` characters at most). */
  output(): string;
  exited: Promise<Exit>;
  /** Both pipes closed: everything the process (and any child holding them) wrote has been read. */
  drained: Promise<unknown>;
}

export interface SpawnOptions {
  /** The service's environment; PATH is added when missing. */
  env: Record<string, string>;
  /** Node flags before the script (e.g. --import hooks, --cpu-prof). */
  nodeArgs?: string[];
  /** A command prefix (e.g. strace and its options); the service then runs as the wrapper's child. */
  wrapWith?: string[];
  /** Keep at most about this many characters of output (long bench runs); everything when omitted. */
  maxOutput?: number;
  /** The service's entry point (another build, e.g. the previous release's); SERVICE_MAIN when omitted. */
  main?: string;
}

export function spawnService(options: SpawnOptions): ServiceProcess {
  const env = { PATH: process.env.PATH ?? '', ...options.env };
  const args = [...(options.nodeArgs ?? []), options.main ?? SERVICE_MAIN];
  const wrap = options.wrapWith ?? [];
  const child = wrap.length > 0
    ? spawn(wrap[0], [...wrap.slice(1), process.execPath, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer) => {
    output += chunk;
    // Trim to half the bound, not at every chunk: the copy is paid once per maxOutput/2 characters.
    if (options.maxOutput !== undefined && output.length > options.maxOutput) output = output.slice(-Math.floor(options.maxOutput / 2));
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const drained = Promise.all([once(child.stdout!, 'close'), once(child.stderr!, 'close')]);
  return { child, output: () => output, exited, drained };
}

/** Waits until GET <adminUrl>/readyz answers 200; fails at once if the process exits first. */
export async function waitUntilReady(adminUrl: string, service: ServiceProcess, timeoutMs = 60_000): Promise<void> {
  const gone = new AbortController();
  void service.exited.then(({ code, signal }) => gone.abort(new Error(`service exited (${signal ?? `code ${code}`}) before it was ready:\n${service.output().slice(-4000)}`)));
  // The last answer (or connection failure) since the process said it listens: what a timeout reports.
  let lastAnswer = 'none';
  try {
    await waitFor(
      `${adminUrl}/readyz to answer 200`,
      async () => {
        try {
          // Bounded: a hung answer is an answer to report, not a wait beyond the caller's deadline.
          const response = await fetch(`${adminUrl}/readyz`, { signal: AbortSignal.timeout(5000) });
          const body = await response.text();
          lastAnswer = `${response.status} ${body.slice(0, 500)}`;
          return response.status === 200;
        } catch (error) {
          const cause = (error as Error & { cause?: { code?: string; message?: string } }).cause;
          lastAnswer = `${(error as Error).name}: ${cause?.code ?? cause?.message ?? (error as Error).message}`;
          throw error;
        }
      },
      timeoutMs,
      100,
      gone.signal,
    );
  } catch (error) {
    if (gone.signal.aborted) throw gone.signal.reason;
    throw new Error(`${(error as Error).message}; last answer: ${lastAnswer}:\n${service.output().slice(-4000)}`);
  }
}
