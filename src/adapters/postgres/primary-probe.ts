// Which Postgres server this process writes to, for /readyz and /metrics (ace_postgres_primary_info):
// during a failover an operator sees each instance leave the old primary and reach the promoted one.
// The check also proves the server takes writes: a server in recovery or read-only is "not ready".
import client from 'prom-client';
import type { Sql } from 'postgres';
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

export class PrimaryProbe {
  private readonly gauge: client.Gauge<'server'> | undefined;
  private readonly hosts: { host: string; port: number }[];

  constructor(
    private readonly sql: Sql,
    private readonly options: { url: string; timeoutMs: number; embedded: boolean; registry?: client.Registry },
  ) {
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
        this.sql`
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
