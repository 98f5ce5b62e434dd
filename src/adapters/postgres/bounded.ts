// The store's deadline and failure mapping, shared by every Postgres adapter: a call or a transaction
// that does not answer within STORE_TIMEOUT_MS, or fails in a way worth a retry, becomes
// StoreUnavailableError (a 503 with Retry-After), never a hang or a stack trace.
import type { PendingQuery, Sql, TransactionSql } from 'postgres';
import { StoreUnavailableError, WriteDeadlineError } from '../../core/errors.js';
import { withTimeout } from '../../core/support/deadline.js';
import { classifyPostgresError, isConnectionFailure, toStoreError } from './errors.js';

export interface Bounds {
  timeoutMs: number;
  /** Told whether the store answered (true) or is away (false): the store-up metric of the main pool. */
  onHealth?: (up: boolean) => void;
}

/** What a Postgres adapter is built on: a pool, and the deadline every call on it is held to. */
export interface PostgresPoolOptions {
  sql: Sql;
  timeoutMs: number;
}

/** The base of the Postgres adapters whose every call is one bounded call (`run`) on the pool. */
export abstract class BoundedPostgres {
  protected readonly sql: Sql;
  private readonly timeoutMs: number;

  constructor({ sql, timeoutMs }: PostgresPoolOptions) {
    this.sql = sql;
    this.timeoutMs = timeoutMs;
  }

  protected run<T>(fn: () => Promise<T>): Promise<T> {
    return boundedCall({ timeoutMs: this.timeoutMs }, fn);
  }
}

/** Reports the outcome of a bounded promise to `onHealth`: an answer is up, a StoreUnavailableError down. */
function reported<T>(bounds: Bounds, promise: Promise<T>): Promise<T> {
  if (!bounds.onHealth) return promise;
  const onHealth = bounds.onHealth;
  return promise.then(
    (value) => {
      onHealth(true);
      return value;
    },
    (error: unknown) => {
      if (error instanceof StoreUnavailableError) onHealth(false);
      throw error;
    },
  );
}

/** A store call (one or more statements on the pool) bounded by the deadline, its failure mapped. */
export function boundedCall<T>(bounds: Bounds, fn: () => Promise<T>): Promise<T> {
  return reported(
    bounds,
    withTimeout('postgres', fn(), bounds.timeoutMs).catch((error: unknown) => {
      throw toStoreError(error);
    }),
  );
}

/** Thrown inside a transaction that reached its deadline, so that the driver rolls back instead of committing. */
class Abandoned extends Error {}

/**
 * Runs `fn` in a transaction bounded by the store deadline, on the server and here:
 * - the server cancels any statement or lock wait past the deadline (SET LOCAL statement_timeout and
 *   lock_timeout) and ends a session left idle inside the transaction (a client that vanished);
 * - here, at the deadline the transaction can no longer send a query nor reach COMMIT: whatever happens
 *   later, it rolls back. No CancelRequest is sent: it needs a new connection, the very thing that fails
 *   when the store is unreachable, and postgres.js drops the promise of a failed cancel (an unhandled
 *   rejection that ended the process when a black-holed connection was reset); the server's own
 *   statement and lock timeouts, equal to the deadline, end the statement instead.
 * So a failure is "not applied", except when COMMIT was already sent and did not answer within a short
 * grace: then the outcome is unknown and the error is WriteDeadlineError.
 */
export function boundedTransaction<T>(sql: Sql, bounds: Bounds, fn: (tx: TransactionSql) => Promise<T>): Promise<T> {
  const { timeoutMs } = bounds;
  const graceMs = Math.min(1000, Math.ceil(timeoutMs / 2));
  let expired = false;
  let committing = false;
  const work = sql.begin(async (tx) => {
    if (expired) throw new Abandoned();
    await tx`
      SELECT set_config('statement_timeout', ${String(timeoutMs)}, true),
             set_config('lock_timeout', ${String(timeoutMs)}, true),
             set_config('idle_in_transaction_session_timeout', ${String(timeoutMs + graceMs)}, true)`;
    // Every query of `fn` goes through this proxy: none starts after the deadline.
    const tracked = new Proxy(tx, {
      apply: (target, self, args) => {
        if (expired) throw new Abandoned();
        return Reflect.apply(target, self, args) as PendingQuery<any>;
      },
    });
    const result = await fn(tracked);
    if (expired) throw new Abandoned(); // too late: the caller was told "not applied"
    committing = true;
    return result as T;
  }) as Promise<T>;
  // Whatever the caller was told, a late outcome must never surface as an unhandled rejection.
  const settled = work.then(() => undefined, () => undefined);

  const bounded = new Promise<T>((resolve, reject) => {
    const fail = (error: unknown) => {
      // Only a broken connection leaves a COMMIT's outcome unknown; any answer from the server is definite.
      if (committing && isConnectionFailure(error)) reject(new WriteDeadlineError('postgres', settled, error));
      else if (error instanceof Abandoned || classifyPostgresError(error) !== 'other') {
        reject(new StoreUnavailableError('postgres', error));
      } else reject(error);
    };
    const timer = setTimeout(() => {
      expired = true;
      if (!committing) {
        reject(new StoreUnavailableError('postgres', new Error(`write not done within ${timeoutMs} ms; rolled back`)));
        return;
      }
      // COMMIT is on its way: give it a moment, then admit that the outcome is unknown.
      const grace = setTimeout(
        () => reject(new WriteDeadlineError('postgres', settled, new Error(`COMMIT not answered within ${timeoutMs + graceMs} ms`))),
        graceMs,
      );
      void settled.then(() => clearTimeout(grace));
    }, timeoutMs);
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error) => {
        clearTimeout(timer);
        fail(error);
      },
    );
  });
  return reported(bounds, bounded);
}
