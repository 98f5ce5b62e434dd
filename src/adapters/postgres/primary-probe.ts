// Which Postgres server this process writes to, for /readyz and /metrics (ace_postgres_primary_info):
// during a failover an operator sees each instance leave the old primary and reach the promoted one.
// The check also proves the server takes writes: a server in recovery or read-only is "not ready".
import { APPLICATION_NAME } from './cluster-versions.js';
import client from 'prom-client';
import postgres, { type Sql } from 'postgres';
import { withTimeout } from '../../core/support/deadline.js';
import { parsePostgresUrl } from '../../support/postgres-url.js';

export interface PrimaryState {
  /** The server answers and accepts writes (not in recovery, not read-only). */
  writable: boolean;
  /** host:port of the server the pool reached (as DATABASE_URL names it when it can tell), or 'none'. */
  server: string;
  /** Why not writable: 'in recovery', 'read-only', or the failure's code. */
  reason?: string;
}

/**
 * Why no writable primary was found, in words an operator acts on: refused, unreachable, authentication,
 * a missing database, a standby. Never the URL (it may hold a password); `timeoutMs` is the attempt's bound.
 */
export function describeNoPrimary(reason: string | undefined, timeoutMs: number): string {
  switch (reason) {
    case 'in recovery':
      return 'standby only: the server is in recovery (a hot standby); DATABASE_URL must reach the primary (list every host)';
    case 'read-only':
      return 'read-only: the server (or the user or database, default_transaction_read_only) refuses writes';
    case 'ECONNREFUSED':
      return 'connection refused: nothing listens at that host and port';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host name not resolved';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'host unreachable';
    case 'ETIMEDOUT':
    case 'CONNECT_TIMEOUT':
      return `no answer within ${Math.round(timeoutMs / 100) / 10} s: an unreachable host, a firewall dropping packets, or an overloaded server`;
    case '28P01':
    case '28000':
      return 'authentication failed: check the user and password in DATABASE_URL (and pg_hba.conf)';
    case '3D000':
      return 'the database does not exist: create it, or fix its name in DATABASE_URL';
    case '57P03':
      return 'the server is starting up';
    case '53300':
      return 'too many connections: the server (or pooler) is at its limit';
    default:
      // Our own bound on the check (withTimeout): the driver was still connecting.
      if (reason?.startsWith('no answer within')) return describeNoPrimary('CONNECT_TIMEOUT', timeoutMs);
      return `connection failed (${reason ?? 'unknown'})`;
  }
}

export interface PrimaryProbeOptions {
  /** The main pool, asked whether the server it reaches accepts writes. */
  sql: Sql;
  /** DATABASE_URL: its hosts name the primary, and `explain` asks them directly. */
  url: string;
  /** Bound on a check (STORE_TIMEOUT_MS) unless the caller gives a longer one. */
  timeoutMs: number;
  /** The embedded PGlite: always its own primary. */
  embedded: boolean;
  /** Where the primary-info gauge goes; none: no gauge. */
  registry?: client.Registry;
}

export class PrimaryProbe {
  private readonly gauge: client.Gauge<'server'> | undefined;
  private readonly hosts: { host: string; port: number }[];

  constructor(private readonly options: PrimaryProbeOptions) {
    this.hosts = parsePostgresUrl(options.url).url?.hosts ?? [];
    this.gauge = options.registry
      ? new client.Gauge({
          name: 'ace_postgres_primary_info',
          help: 'The Postgres server this instance writes to (value 1; label server = host:port); absent while none accepts writes.',
          labelNames: ['server'],
          registers: [options.registry],
          // Cluster workers: one series per server some worker writes to.
          aggregator: 'max',
        })
      : undefined;
  }

  /** `timeoutMs`: longer at start-up (a first connection, or PGlite loading, may take seconds). */
  async check(timeoutMs = this.options.timeoutMs): Promise<PrimaryState> {
    let state: PrimaryState;
    try {
      const [row] = await withTimeout(
        'postgres',
        this.options.sql`
          SELECT host(inet_server_addr()) AS addr, inet_server_port() AS port, pg_is_in_recovery() AS recovery,
                 current_setting('transaction_read_only') AS read_only`,
        timeoutMs,
      );
      const reason = row.recovery !== false ? 'in recovery' : row.read_only !== 'off' ? 'read-only' : undefined;
      state = { writable: reason === undefined, server: this.name(row.addr, row.port), ...(reason ? { reason } : {}) };
    } catch (error) {
      // Unreachable, timed out or refusing: all mean "no primary"; /readyz and start-up report it.
      const failure = (error as { cause?: unknown } | null)?.cause ?? error;
      const code = (failure as { code?: unknown } | null)?.code;
      state = { writable: false, server: 'none', reason: typeof code === 'string' ? code : (failure as Error).message };
    }
    // One series at most: the label set stays bounded whatever the failovers.
    this.gauge?.reset();
    if (state.writable) this.gauge?.set({ server: state.server }, 1);
    return state;
  }

  /**
   * Start-up only, after a failed check: the driver, told to find a primary, drops the connection of a
   * standby (CONNECTION_DESTROYED), which says nothing. One connection without that demand asks a host
   * that answers whether it is in recovery; 'in recovery' replaces the reason when it is.
   */
  async explain(state: PrimaryState, timeoutMs: number): Promise<PrimaryState> {
    const driverUrl = parsePostgresUrl(this.options.url).url?.driverUrl;
    if (state.writable || this.options.embedded || !driverUrl || !/^CONNECTION_/.test(state.reason ?? '')) return state;
    const direct = postgres(driverUrl, { max: 1, connect_timeout: Math.max(1, Math.ceil(timeoutMs / 1000)), onnotice: () => {}, connection: { application_name: APPLICATION_NAME } });
    try {
      const [row] = await withTimeout('postgres', direct`SELECT host(inet_server_addr()) AS addr, inet_server_port() AS port, pg_is_in_recovery() AS recovery`, timeoutMs);
      return row.recovery === true ? { writable: false, server: this.name(row.addr, row.port), reason: 'in recovery' } : state;
    } catch {
      return state; // no host answers this connection either: the check's own reason stands
    } finally {
      await direct.end({ timeout: 1 });
    }
  }

  /** The configured host:port this is (a pooler reports its upstream: then the server's own address). */
  private name(addr: string | null, port: number | null): string {
    if (this.options.embedded) return 'embedded';
    if (addr === null || port === null) return 'local';
    const samePort = this.hosts.filter((h) => h.port === port);
    const match = samePort.find((h) => h.host === addr) ?? (samePort.length === 1 && this.hosts.length > 1 ? samePort[0] : undefined);
    const host = match?.host ?? addr;
    return `${host.includes(':') ? `[${host}]` : host}:${port}`;
  }
}
