// The one place that decides which Postgres failures mean "try again" (503 with Retry-After) rather than
// a bug (500). Used by every Postgres adapter (through bounded.ts, and by the audit trail) so that a
// failover, a restart or a pooler hiccup is answered the same way everywhere.
import { StoreUnavailableError } from '../../core/errors.js';
import postgres from 'postgres';

/**
 * - `connection`: the connection broke or could not be made (the server may or may not have applied
 *   what was in flight: a COMMIT sent on it has an unknown outcome);
 * - `deadline`: the server ended the statement or transaction at our own deadline (rolled back);
 * - `transient`: the server answered and refused this time, nothing applied, the same request can succeed
 *   later: a server in recovery or read-only (a standby, or a primary during a failover), a shutdown in
 *   progress, a serialization failure or deadlock, a pooler that lost its server or its prepared statement;
 * - `other`: anything else (a constraint, a bug): not retried, not hidden.
 */
export type PostgresFailure = 'connection' | 'deadline' | 'transient' | 'other';

/** Errors raised by Node's sockets and by postgres.js itself when a connection fails or ends. */
const CLIENT_CONNECTION = /^(ECONN|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|CONNECT_TIMEOUT|CONNECTION_)/;

/**
 * SQLSTATEs the server (or PgBouncer, which answers in Postgres' protocol) sends for a failed connection.
 * 57: shutdowns (57P01 admin, 57P02 crash, 57P03 starting up); 53: out of resources (too many connections);
 * 28: authentication refused after start (a rotated password, a role set NOLOGIN): the store is unusable
 * until an operator acts, which is a 503 to the caller, not a bug of this request.
 */
const SERVER_CONNECTION = /^(08|57|53|28)/;

const DEADLINE = new Set([
  '57014', // query_canceled: our statement_timeout
  '55P03', // lock_not_available: our lock_timeout
  '25P03', // idle_in_transaction_session_timeout
]);

const TRANSIENT = new Set([
  '25006', // read_only_sql_transaction: a standby, or a primary fenced read-only during a failover
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '26000', // invalid_sql_statement_name: a prepared statement another pooled server connection never saw
  '55000', // object_not_in_prerequisite_state: e.g. "recovery is in progress" from functions on a standby
]);

export function classifyPostgresError(error: unknown): PostgresFailure {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return 'other';
  if (DEADLINE.has(code)) return 'deadline';
  if (CLIENT_CONNECTION.test(code) || SERVER_CONNECTION.test(code)) return 'connection';
  if (TRANSIENT.has(code)) return 'transient';
  return 'other';
}

/** Any failure after which the same request may succeed: the caller is told 503 + Retry-After. */
export function isRetryable(error: unknown): boolean {
  return error instanceof StoreUnavailableError || classifyPostgresError(error) !== 'other';
}

/** The connection itself failed: whatever was sent on it (a COMMIT) has an unknown outcome. */
export function isConnectionFailure(error: unknown): boolean {
  return classifyPostgresError(error) === 'connection';
}

/** A retryable failure as StoreUnavailableError (503); anything else unchanged. */
export function toStoreError(error: unknown): unknown {
  if (error instanceof StoreUnavailableError) return error;
  return isRetryable(error) ? new StoreUnavailableError('postgres', error) : error;
}

/**
 * An error of the driver itself (a server's or pooler's answer, or postgres.js's own connection error) that
 * says "the store is away, try again": the kind a promise the driver dropped may carry (dropped-store-errors.ts).
 */
export function isDriverStoreFailure(reason: unknown): boolean {
  if (!(reason instanceof Error)) return false;
  const fromDriver = reason instanceof postgres.PostgresError || CLIENT_CONNECTION.test(String((reason as { code?: unknown }).code));
  return fromDriver && classifyPostgresError(reason) !== 'other';
}
