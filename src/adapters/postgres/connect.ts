// The pool every Postgres adapter runs on.
import { APPLICATION_NAME } from './cluster-versions.js';
import postgres, { type Sql } from 'postgres';
import { parsePostgresUrl } from '../../support/postgres-url.js';
import { withWholeResults } from './whole-results.js';

export interface PostgresOptions {
  url: string;
  poolSize: number;
  timeoutMs: number;
  /** The embedded PGlite: one local server, nothing to fail over to, so no primary check at connect. */
  embedded?: boolean;
}

/**
 * A pool that works through a transaction-mode pooler and across a failover, with no pooler setting:
 * - no named prepared statements unless the URL says `prepare=true` (a direct connection): through
 *   PgBouncer each transaction may run on another server connection, which never saw the statement;
 * - no session state: settings are SET LOCAL (set_config(..., true)) and locks are transaction-scoped;
 * - `primary` session target: a server in recovery is detected when connecting and left for the next
 *   host of a multi-host URL, so nothing is ever written to a standby (libpq's `read-write` trusts
 *   default_transaction_read_only, which is off on a hot standby).
 */
export function connectPostgres(options: PostgresOptions): Sql {
  const { url, problems } = parsePostgresUrl(options.url);
  // The configuration refused a bad DATABASE_URL already; this is a programming error.
  if (!url) throw new Error(problems.join('; '));
  // Every result checked for the driver's missing-rows defect (whole-results.ts).
  return withWholeResults(postgres(url.driverUrl, {
    max: options.poolSize,
    connect_timeout: Math.max(1, Math.ceil(options.timeoutMs / 1000)),
    idle_timeout: 60,
    max_lifetime: 30 * 60,
    prepare: url.prepare,
    // Reconnect attempts back off up to 1 s (the driver's default grows to 20 s): after a failover the pool
    // must find the promoted primary within about a second, not after a long wait earned during the outage.
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1),
    ...(url.target === 'primary' && !options.embedded ? { target_session_attrs: 'primary' as const } : {}),
    onnotice: () => {},
    // Timestamps come back as ISO strings through toISOString() in the feature modules' mappers.
    transform: { undefined: null },
    connection: { application_name: APPLICATION_NAME },
  }));
}
