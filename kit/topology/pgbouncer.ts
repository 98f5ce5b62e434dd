// PgBouncer (Debian's 1.18) in front of a Postgres node, in transaction pooling mode and otherwise its
// defaults: in particular no prepared-statement support (max_prepared_statements arrived in 1.21), which
// is the trap a driver's default named prepared statements fall into.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { HOST, Proc, makeTempDir, registerHandle, removeDir, run, serviceUser, unregisterHandle, pollFor, withPort } from './common.js';
import { PG_BIN } from './common.js';

export const PGBOUNCER_BIN = process.env.TOPOLOGY_PGBOUNCER_BIN ?? '/usr/sbin/pgbouncer';

export interface PgBouncerOptions {
  /** Port on 127.0.0.1; a free one below 32768 when omitted. */
  port?: number;
  /** Where to pool to: a node from startPostgres/startStandby, or any {port} on 127.0.0.1. */
  upstream: { port: number; host?: string };
  /** Pool mode; 'transaction' unless told. */
  poolMode?: 'session' | 'transaction' | 'statement';
  /** Extra [pgbouncer] settings (win over the kit's). */
  settings?: Record<string, string | number>;
  timeoutMs?: number;
}

export class PgBouncerNode {
  private destroyed = false;
  constructor(
    readonly port: number,
    readonly dir: string,
    readonly proc: Proc,
    /** The upstream it was started with (retarget() changes it). */
    public upstream: { host: string; port: number },
    private readonly writeConfig: (upstream: { host: string; port: number }) => void,
    private readonly timeoutMs: number,
  ) {}

  get host(): string {
    return HOST;
  }
  get pid(): number {
    return this.proc.pid;
  }

  /** postgres://postgres@127.0.0.1:<port>/<database>: any database name is passed through upstream. */
  url(database = 'postgres'): string {
    return `postgres://postgres@${HOST}:${this.port}/${database}`;
  }

  /** A `postgres` client through the pooler, the driver's defaults unless `options` say otherwise. */
  client(database = 'postgres', options: postgres.Options<Record<string, postgres.PostgresType>> = {}): postgres.Sql {
    return postgres(this.url(database), { onnotice: () => {}, connect_timeout: 5, ...options });
  }

  /**
   * Points the pooler at another upstream (e.g. a promoted standby) and reloads it (SIGHUP); new server
   * connections go there. Resolves once a query through the pooler reaches the new upstream's port.
   */
  async retarget(upstream: { port: number; host?: string }): Promise<void> {
    this.upstream = { host: upstream.host ?? HOST, port: upstream.port };
    this.writeConfig(this.upstream);
    this.proc.child.kill('SIGHUP');
    await pollFor(`pgbouncer :${this.port} to reach upstream :${upstream.port}`, async () => {
      this.proc.assertRunning();
      const sql = this.client('postgres', { prepare: false, max: 1 });
      try {
        const [r] = await sql`SELECT current_setting('port') AS port`;
        return Number(r.port) === upstream.port;
      } finally {
        await sql.end({ timeout: 5 });
      }
    }, { timeoutMs: this.timeoutMs });
  }

  async stop(): Promise<void> {
    // SIGINT: PgBouncer's "safe shutdown" waits for clients; SIGTERM is immediate, what a test wants.
    await this.proc.stop('SIGTERM', this.timeoutMs);
  }

  async kill(): Promise<void> {
    await this.proc.kill();
  }

  async destroy(): Promise<void> {
    if (this.destroyed) return;
    this.destroyed = true;
    unregisterHandle(this);
    await this.stop();
    removeDir(this.dir);
  }
}

/** Starts PgBouncer on 127.0.0.1 pooling every database to `upstream`; resolves once it accepts connections. */
export async function startPgBouncer(opts: PgBouncerOptions): Promise<PgBouncerNode> {
  const user = serviceUser();
  const dir = makeTempDir('pgbouncer', user);
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const ini = path.join(dir, 'pgbouncer.ini');
  // auth_type trust still requires the user to be listed in auth_file.
  writeFileSync(path.join(dir, 'userlist.txt'), '"postgres" ""\n');
  try {
    return await withPort(opts.port, async (port) => {
      const writeConfig = (upstream: { host: string; port: number }) => {
        const settings: Record<string, string | number> = {
          listen_addr: HOST,
          listen_port: port,
          unix_socket_dir: dir,
          pool_mode: opts.poolMode ?? 'transaction',
          auth_type: 'trust',
          auth_file: path.join(dir, 'userlist.txt'),
          admin_users: 'postgres',
          pidfile: path.join(dir, 'pgbouncer.pid'),
          ...opts.settings,
        };
        writeFileSync(ini, `[databases]\n* = host=${upstream.host} port=${upstream.port}\n\n[pgbouncer]\n${Object.entries(settings).map(([k, v]) => `${k} = ${v}`).join('\n')}\n`);
      };
      const upstream = { host: opts.upstream.host ?? HOST, port: opts.upstream.port };
      writeConfig(upstream);
      const proc = new Proc(`pgbouncer :${port}`, PGBOUNCER_BIN, [ini], path.join(dir, 'pgbouncer.log'), { user, cwd: dir });
      const node = new PgBouncerNode(port, dir, proc, upstream, writeConfig, timeoutMs);
      registerHandle(node);
      try {
        await pollFor(`pgbouncer on ${HOST}:${port} to accept connections (pg_isready)`, async () => {
          proc.assertRunning();
          await run(path.join(PG_BIN, 'pg_isready'), ['-h', HOST, '-p', String(port), '-q', '-t', '2'], { timeoutMs: 5_000 });
          return true;
        }, { timeoutMs });
      } catch (err) {
        unregisterHandle(node);
        await proc.stop('SIGTERM', timeoutMs);
        throw err;
      }
      return node;
    });
  } catch (err) {
    removeDir(dir);
    throw err;
  }
}
