// Real monitoring for the alert suite: a private Prometheus (Debian's binary) and a private PostgreSQL
// cluster that a test may stop and start (never the shared server on 5432: other suites use it). Each
// runs as a child process on its own port below 32768 and its own temp directory, and is stopped by PID.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import postgres from 'postgres';
import { waitFor } from '../../kit/wait.js';

const PG_BIN = process.env.TEST_PG_BIN ?? '/usr/lib/postgresql/15/bin';

const children = new Set<ChildProcess>();
process.once('exit', () => children.forEach((c) => c.kill('SIGKILL')));

/** A free port in 20000-32767 (below the kernel's ephemeral range, as the machine's rules ask). */
export async function freeLowPort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_768);
    const free = await new Promise<boolean>((resolve) => {
      const server = net.createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new Error('no free port in 20000-32767');
}

function track(child: ChildProcess, name: string): { exited: Promise<void>; output: () => string } {
  let output = '';
  child.stdout?.on('data', (c) => (output = (output + c).slice(-20_000)));
  child.stderr?.on('data', (c) => (output = (output + c).slice(-20_000)));
  children.add(child);
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      children.delete(child);
      resolve();
    }),
  );
  child.once('error', (error) => (output += `\n${name}: ${error.message}`));
  return { exited, output: () => output };
}

async function stopChild(child: ChildProcess | undefined, exited: Promise<void> | undefined, signal: NodeJS.Signals): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  child.kill(signal);
  await exited;
}

// ---------------------------------------------------------------------------------------------------
// PostgreSQL

export interface PostgresCluster {
  port: number;
  /** URL of the cluster's `postgres` database (user postgres, trust). */
  url: string;
  running(): boolean;
  /** Starts (or restarts) the server and waits until it answers a query. */
  start(): Promise<void>;
  /** Fast shutdown (SIGINT to the postmaster): clients are disconnected, new connections refused. */
  stop(): Promise<void>;
  /** Stops the server and removes its data directory. */
  destroy(): Promise<void>;
}

/**
 * A throw-away cluster (initdb, fsync off). initdb and postgres refuse to run as root, so as root they
 * run as the `postgres` user, which then owns the data directory.
 */
export async function startPostgresCluster(): Promise<PostgresCluster> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ace-pg-'));
  const dataDir = path.join(dir, 'data');
  const asUser: { uid?: number; gid?: number } = {};
  if (process.getuid?.() === 0) {
    const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
    asUser.uid = id('-u');
    asUser.gid = id('-g');
    if (!Number.isInteger(asUser.uid) || asUser.uid <= 0) throw new Error('running as root and there is no `postgres` user to run PostgreSQL as');
    chownSync(dir, asUser.uid, asUser.gid);
  }
  const init = spawnSync(`${PG_BIN}/initdb`, ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C'], {
    ...asUser,
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stdout}${init.stderr}${init.error?.message ?? ''}`);

  const port = await freeLowPort();
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  let child: ChildProcess | undefined;
  let exited: Promise<void> | undefined;
  let output = () => '';
  const cluster: PostgresCluster = {
    port,
    url,
    running: () => child !== undefined && child.exitCode === null && child.signalCode === null,
    async start() {
      if (cluster.running()) return;
      child = spawn(
        `${PG_BIN}/postgres`,
        ['-D', dataDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'fsync=off', '-c', 'max_connections=40'],
        { ...asUser, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      ({ exited, output } = track(child, 'postgres'));
      await waitFor(`private postgres on ${port}`, async () => {
        if (!cluster.running()) throw new Error(`postgres exited:\n${output()}`);
        const sql = postgres(url, { max: 1, connect_timeout: 1, onnotice: () => {} });
        try {
          await sql`SELECT 1`;
          return true;
        } finally {
          await sql.end({ timeout: 1 });
        }
      }, 30_000);
    },
    async stop() {
      await stopChild(child, exited, 'SIGINT');
    },
    async destroy() {
      await stopChild(child, exited, 'SIGINT');
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await cluster.start();
  return cluster;
}

// ---------------------------------------------------------------------------------------------------
// Prometheus

export interface PromAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
  activeAt: string;
  value: string;
}

export interface PromAlertRule {
  name: string;
  query: string;
  duration: number;
  state: 'inactive' | 'pending' | 'firing';
  health: string;
  lastError?: string;
  alerts: PromAlert[];
}

export interface Prometheus {
  url: string;
  /** Pending and firing alerts (GET /api/v1/alerts). */
  alerts(): Promise<PromAlert[]>;
  /** Every alerting rule with its state and health (GET /api/v1/rules?type=alert). */
  alertRules(): Promise<PromAlertRule[]>;
  /** An instant query's result vector. */
  query(expr: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]>;
  output(): string;
  stop(): Promise<void>;
}

export interface PrometheusOptions {
  /** Text of a Prometheus rule file. */
  rules: string;
  job: string;
  /** host:port targets, scraped on /metrics. */
  targets: string[];
  /** Extra labels on every scraped series (what the Prometheus Operator adds: namespace, pod, ...). */
  targetLabels: Record<string, string>;
  /** Scrape and rule-evaluation interval. */
  interval: string;
}

export async function startPrometheus(options: PrometheusOptions): Promise<Prometheus> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ace-prom-'));
  writeFileSync(path.join(dir, 'rules.yaml'), options.rules);
  writeFileSync(
    path.join(dir, 'prometheus.yml'),
    stringifyYaml({
      global: { scrape_interval: options.interval, scrape_timeout: options.interval, evaluation_interval: options.interval },
      rule_files: ['rules.yaml'],
      scrape_configs: [{ job_name: options.job, static_configs: [{ targets: options.targets, labels: options.targetLabels }] }],
    }),
  );
  const port = await freeLowPort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    'prometheus',
    [
      `--config.file=${path.join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--storage.tsdb.retention.time=1h',
      '--log.level=warn',
    ],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const { exited, output } = track(child, 'prometheus');
  const running = () => child.exitCode === null && child.signalCode === null;
  const api = async (pathAndQuery: string) => {
    const response = await fetch(`${url}${pathAndQuery}`);
    const body = (await response.json()) as { status: string; data: any; error?: string };
    if (body.status !== 'success') throw new Error(`${pathAndQuery}: ${body.error}`);
    return body.data;
  };
  const prometheus: Prometheus = {
    url,
    alerts: async () => (await api('/api/v1/alerts')).alerts,
    alertRules: async () => (await api('/api/v1/rules?type=alert')).groups.flatMap((g: any) => g.rules),
    query: async (expr) => (await api(`/api/v1/query?query=${encodeURIComponent(expr)}`)).result,
    output,
    async stop() {
      await stopChild(child, exited, 'SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await waitFor(`prometheus on ${port}`, async () => {
      if (!running()) throw new Error(`prometheus exited:\n${output()}`);
      return (await fetch(`${url}/-/ready`)).status === 200;
    }, 30_000);
  } catch (error) {
    await prometheus.stop();
    throw new Error(`${(error as Error).message}\n${output()}`);
  }
  return prometheus;
}

/**
 * The rule file with every duration scaled down, minutes becoming seconds: `for: 5m` -> `for: 5s`,
 * `rate(x[5m])` -> `rate(x[5s])`. With 1 s scrapes and evaluations the alerts then behave as in
 * production, 60 times faster. Groups named in `unscaled` keep their durations (a test proves those as
 * shipped). Every group's own `interval` is dropped, so the test's evaluation interval applies.
 */
export function scaleRuleDurations(rulesText: string, factor = 60, unscaled: string[] = []): string {
  const scale = (amount: string, unit: string) => {
    const seconds = Number(amount) * { s: 1, m: 60, h: 3600, d: 86400 }[unit]!;
    return `${Math.max(1, Math.round(seconds / factor))}s`;
  };
  const rules = parseYaml(rulesText);
  for (const group of rules.groups) {
    delete group.interval;
    if (unscaled.includes(group.name)) continue;
    for (const rule of group.rules) {
      if (rule.for) {
        const m = /^(\d+)([smhd])$/.exec(rule.for);
        if (!m) throw new Error(`${rule.alert}: cannot scale for: ${rule.for}`);
        rule.for = scale(m[1]!, m[2]!);
      }
      rule.expr = String(rule.expr).replace(/\[(\d+)([smhd])\]/g, (_, amount: string, unit: string) => `[${scale(amount, unit)}]`);
      if (/\[\d+[smhd][^\]]/.test(rule.expr)) throw new Error(`${rule.alert}: a range this scaler does not handle in ${rule.expr}`);
    }
  }
  return stringifyYaml(rules);
}

// ---------------------------------------------------------------------------------------------------
// A small disk

export interface SmallDisk {
  dir: string;
  /** Fills what is left of the disk with one file: the next write that needs a new page fails (ENOSPC). */
  fill(): void;
  /** Removes the filler. */
  free(): void;
  unmount(): void;
}

/**
 * A tmpfs of `megabytes` mounted on a temp directory: as root, or through `sudo -n`. Undefined when
 * neither can mount (the caller skips what needs it).
 */
export function mountSmallDisk(megabytes: number): SmallDisk | undefined {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ace-disk-'));
  const asRoot = (command: string, args: string[]) => {
    const direct = process.getuid?.() === 0;
    const run = direct ? spawnSync(command, args, { encoding: 'utf8' }) : spawnSync('sudo', ['-n', command, ...args], { encoding: 'utf8' });
    return run.status === 0;
  };
  if (!asRoot('mount', ['-t', 'tmpfs', '-o', `size=${megabytes}m,mode=1777`, 'tmpfs', dir])) {
    rmSync(dir, { recursive: true, force: true });
    return undefined;
  }
  const filler = path.join(dir, 'filler');
  return {
    dir,
    fill() {
      // dd stops at ENOSPC with a non-zero status: that is the point.
      spawnSync('dd', ['if=/dev/zero', `of=${filler}`, 'bs=64k'], { encoding: 'utf8' });
    },
    free() {
      rmSync(filler, { force: true });
    },
    unmount() {
      if (!asRoot('umount', [dir])) throw new Error(`could not unmount ${dir}`);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
