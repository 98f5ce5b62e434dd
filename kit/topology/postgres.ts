// Private PostgreSQL 15 clusters on loopback: a primary (initdb) and hot standbys (pg_basebackup -R), with
// promotion for switchover tests. Each cluster has its own temp folder (data, socket, log) and port.
import path from 'node:path';
import { chownSync, existsSync, realpathSync, writeFileSync } from 'node:fs';
import postgres from 'postgres';
import {
  HOST, PG_BIN, Proc, makeTempDir, registerHandle, removeDir, run, serviceUser, unregisterHandle, pollFor, withPort,
} from './common.js';

export interface PostgresOptions {
  /** Port on 127.0.0.1; a free one below 32768 when omitted. */
  port?: number;
  /** Extra settings, passed as `-c name=value` (they win over the kit's). */
  settings?: Record<string, string | number>;
  /** Bound on each wait (start, promotion, stop); default 30 s. */
  timeoutMs?: number;
}

export class PostgresNode {
  /** 'primary' or 'standby' (a promoted standby becomes 'primary'). */
  role: 'primary' | 'standby';
  private stopped = false;

  constructor(
    readonly port: number,
    /** The temp folder holding data/, the socket and postgres.log. */
    readonly dir: string,
    readonly proc: Proc,
    role: 'primary' | 'standby',
    private readonly timeoutMs: number,
  ) {
    this.role = role;
  }

  get host(): string {
    return HOST;
  }
  get pid(): number {
    return this.proc.pid;
  }
  get dataDir(): string {
    return path.join(this.dir, 'data');
  }
  get running(): boolean {
    return !this.proc.exited;
  }

  /** postgres://postgres@127.0.0.1:<port>/<database> (trust auth, no password). */
  url(database = 'postgres'): string {
    return `postgres://postgres@${HOST}:${this.port}/${database}`;
  }

  /** A `postgres` client (max 1 connection) on this node; the caller ends it. */
  client(database = 'postgres'): postgres.Sql {
    return postgres(this.url(database), { max: 1, onnotice: () => {}, connect_timeout: 5 });
  }

  /** Runs one SQL text (simple protocol) on a short-lived connection and returns the rows. */
  async query<T extends Record<string, unknown> = Record<string, unknown>>(text: string, database = 'postgres'): Promise<T[]> {
    const sql = this.client(database);
    try {
      return (await sql.unsafe(text)) as unknown as T[];
    } finally {
      await sql.end({ timeout: 5 });
    }
  }

  /** Resolves when pg_isready reports the node accepting connections on 127.0.0.1. */
  async waitReady(): Promise<void> {
    await pollFor(`postgres on ${HOST}:${this.port} to accept connections (pg_isready)`, async () => {
      this.proc.assertRunning();
      try {
        await run(path.join(PG_BIN, 'pg_isready'), ['-h', HOST, '-p', String(this.port), '-q', '-t', '2'], { timeoutMs: 5_000 });
        // A server of someone else's that won a race for this port must not pass for ours.
        const [r] = await this.query<{ dir: string }>("SELECT current_setting('data_directory') AS dir");
        if (r?.dir !== realpathSync(this.dataDir)) throw new Error(`port ${this.port} is served by another cluster (${r?.dir})`);
        return true;
      } catch (err) {
        this.proc.assertRunning();
        throw err;
      }
    }, { timeoutMs: this.timeoutMs });
  }

  /**
   * Promotes this standby (pg_promote, waiting) and resolves once it is out of recovery and accepts
   * writes. Throws on a node that is already primary.
   */
  async promote(): Promise<void> {
    if (this.role !== 'standby') throw new Error(`topology: postgres :${this.port} is not a standby`);
    const timeoutSec = Math.ceil(this.timeoutMs / 1000);
    const [row] = await this.query<{ promoted: boolean }>(`SELECT pg_promote(true, ${timeoutSec}) AS promoted`);
    if (!row?.promoted) throw new Error(`topology: pg_promote on :${this.port} did not finish within ${timeoutSec} s:\n${this.proc.logTail()}`);
    await pollFor(`postgres :${this.port} to leave recovery`, async () => {
      const [r] = await this.query<{ rec: boolean }>('SELECT pg_is_in_recovery() AS rec');
      return r?.rec === false;
    }, { timeoutMs: this.timeoutMs });
    this.role = 'primary';
  }

  /** Clean stop (fast shutdown: SIGINT), SIGKILL if it overruns. The temp folder stays (see destroy()). */
  async stop(): Promise<void> {
    await this.proc.stop('SIGINT', this.timeoutMs);
  }

  /** Crash: SIGKILL the postmaster and every backend, nothing flushed. */
  async kill(): Promise<void> {
    await this.proc.kill();
  }

  /** Stop (if running) and remove the temp folder. Idempotent; what stopAll() calls. */
  async destroy(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    unregisterHandle(this);
    await this.proc.stop('SIGINT', this.timeoutMs);
    removeDir(this.dir);
  }
}

// Fast and small for tests on a shared 2-core box, but replication-capable. fsync off: a crash in these
// tests is a SIGKILL of the process, which loses nothing the kernel already has.
function baseSettings(port: number, dir: string): Record<string, string | number> {
  return {
    listen_addresses: HOST,
    port,
    unix_socket_directories: dir,
    wal_level: 'replica',
    max_wal_senders: 10,
    max_replication_slots: 10,
    hot_standby: 'on',
    fsync: 'off',
    synchronous_commit: 'off',
    shared_buffers: '16MB',
    logging_collector: 'off',
  };
}

function settingArgs(settings: Record<string, string | number>): string[] {
  return Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]);
}

async function launch(
  port: number,
  dir: string,
  role: 'primary' | 'standby',
  opts: PostgresOptions,
): Promise<PostgresNode> {
  const user = serviceUser();
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const settings = { ...baseSettings(port, dir), ...opts.settings };
  const proc = new Proc(`postgres ${role} :${port}`, path.join(PG_BIN, 'postgres'), ['-D', path.join(dir, 'data'), ...settingArgs(settings)], path.join(dir, 'postgres.log'), { user, cwd: dir });
  const node = new PostgresNode(port, dir, proc, role, timeoutMs);
  registerHandle(node);
  try {
    await node.waitReady();
  } catch (err) {
    // Stop only: the caller may retry on another port with the same folder, or removes it.
    unregisterHandle(node);
    await proc.stop('SIGINT', timeoutMs);
    throw err;
  }
  return node;
}

// initdb costs seconds of wall time on a loaded box; it runs once per test process into a template that
// each new cluster copies (cp -a, as the service user). The copies share a system identifier, which only
// matters to replication between them, and that goes through pg_basebackup anyway.
let template: Promise<string> | undefined;

async function initdbTemplate(timeoutMs: number): Promise<string> {
  const user = serviceUser();
  const dir = makeTempDir('pg-template', user);
  const data = path.join(dir, 'data');
  try {
    await run(path.join(PG_BIN, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions'], { user, cwd: dir, timeoutMs });
    // initdb's trust pg_hba already lets 127.0.0.1 replicate; say so explicitly in case its template changes.
    writeFileSync(path.join(data, 'pg_hba.conf'), 'local all all trust\nlocal replication all trust\nhost all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n');
    if (user) chownSync(path.join(data, 'pg_hba.conf'), user.uid, user.gid);
  } catch (err) {
    removeDir(dir);
    throw err;
  }
  return data;
}

/**
 * A fresh private cluster (initdb, trust auth for 127.0.0.1 including replication, wal_level replica,
 * max_wal_senders 10), started and accepting connections. Superuser `postgres`, database `postgres`.
 */
export async function startPostgres(opts: PostgresOptions = {}): Promise<PostgresNode> {
  const user = serviceUser();
  const timeoutMs = opts.timeoutMs ?? 30_000;
  let source = template ? await template.catch(() => undefined) : undefined;
  if (!source || !existsSync(source)) {
    template = initdbTemplate(timeoutMs);
    source = await template;
  }
  const dir = makeTempDir('pg', user);
  try {
    await run('cp', ['-a', source, path.join(dir, 'data')], { user, cwd: dir, timeoutMs });
  } catch (err) {
    removeDir(dir);
    throw err;
  }
  return withPort(opts.port, async (port) => {
    // A retry on another port reuses the copied data folder: only the port setting differs.
    return launch(port, dir, 'primary', opts);
  }).catch((err) => {
    removeDir(dir);
    throw err;
  });
}

/**
 * A hot standby of `primary`: pg_basebackup -R -X stream from it, started, and resolved once it is
 * streaming (pg_stat_wal_receiver status 'streaming').
 */
export async function startStandby(primary: PostgresNode, opts: PostgresOptions = {}): Promise<PostgresNode> {
  const user = serviceUser();
  const dir = makeTempDir('pg-standby', user);
  try {
    await run(path.join(PG_BIN, 'pg_basebackup'), ['-h', HOST, '-p', String(primary.port), '-U', 'postgres', '-D', path.join(dir, 'data'), '-R', '-X', 'stream', '--checkpoint=fast', '--no-sync'], { user, cwd: dir, timeoutMs: opts.timeoutMs ?? 30_000 });
  } catch (err) {
    removeDir(dir);
    throw err;
  }
  const node = await withPort(opts.port, (port) => launch(port, dir, 'standby', opts)).catch((err) => {
    removeDir(dir);
    throw err;
  });
  await pollFor(`standby :${node.port} to stream from primary :${primary.port}`, async () => {
    node.proc.assertRunning();
    const [r] = await node.query<{ status: string }>('SELECT status FROM pg_stat_wal_receiver');
    return r?.status === 'streaming';
  }, { timeoutMs: opts.timeoutMs ?? 30_000 });
  return node;
}

/** Promote a standby (see PostgresNode.promote). */
export async function promote(standby: PostgresNode): Promise<void> {
  await standby.promote();
}

/**
 * Waits until `standby` has replayed everything `primary` had written when this was called (LSN
 * comparison), so a read on the standby sees the writes made before.
 */
export async function waitForReplay(primary: PostgresNode, standby: PostgresNode, timeoutMs = 30_000): Promise<void> {
  const [{ lsn }] = await primary.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
  await pollFor(`standby :${standby.port} to replay up to ${lsn}`, async () => {
    const [r] = await standby.query<{ caught: boolean }>(`SELECT pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn AS caught`);
    return r?.caught === true;
  }, { timeoutMs });
}
