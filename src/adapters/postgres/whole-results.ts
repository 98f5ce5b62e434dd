// postgres.js (3.4.9, the newest) counts a result's rows per connection and resets the count when a statement
// completes, not when one fails part-way through its rows (porsager/postgres#1119 and #1181, open). The next
// query on that connection then resolves with as many empty slots before its own rows as the failed one had
// streamed: `const [row] = await sql...` reads nothing, and a read would say "not found" about a row that
// exists. Every result of the pool is checked here; one with a gap is a store failure (503 + Retry-After),
// and the connection's next query is whole again (its count restarts with this one's completion).
// Transactions need no check: a failed statement aborts its transaction, and the ROLLBACK restarts the count.
import type { Sql } from 'postgres';
import { StoreUnavailableError } from '../../core/errors.js';

/** The driver resolved a result with empty slots before its rows (see above). */
export class IncompleteResultError extends Error {
  readonly code = 'incomplete_result';
  constructor() {
    super('the driver returned a result with missing rows (a statement before it on the connection failed mid-stream)');
    this.name = 'IncompleteResultError';
  }
}

/** True when `rows` (or, for several statements at once, one of its results) has an empty slot before its rows. */
export function hasMissingRows(rows: unknown): boolean {
  if (!Array.isArray(rows) || rows.length === 0) return false;
  if (!(0 in rows)) return true;
  // Several statements (a simple query): an array of results, each a row array with a `command`.
  const first: unknown = rows[0];
  return Array.isArray(first) && 'command' in first && rows.some((result) => Array.isArray(result) && result.length > 0 && !(0 in result));
}

function checked(result: unknown): unknown {
  if (hasMissingRows(result)) throw new StoreUnavailableError('postgres', new IncompleteResultError());
  return result;
}

/** Makes a pending query resolve only with a whole result; anything else (a fragment helper) passes as it is. */
function guard<T>(query: T): T {
  if (!(query instanceof Promise)) return query;
  // The same object stays in the caller's hands (postgres.js tells a nested fragment by its class), so the
  // check goes on its own `then`, the one `await` calls.
  const pending = query as Promise<unknown>;
  const then = pending.then;
  Object.defineProperty(pending, 'then', {
    configurable: true,
    value(onFulfilled?: (value: unknown) => unknown, onRejected?: (reason: unknown) => unknown) {
      return then.call(pending, checked).then(onFulfilled, onRejected);
    },
  });
  return query;
}

/** The pool with every query's result checked: tagged templates and `unsafe`. */
export function withWholeResults(sql: Sql): Sql {
  return new Proxy(sql, {
    apply: (target, thisArg, args: unknown[]) => guard(Reflect.apply(target, thisArg, args) as unknown),
    get: (target, property, receiver) => {
      const value: unknown = Reflect.get(target, property, receiver);
      if (property !== 'unsafe' || typeof value !== 'function') return value;
      return (...args: unknown[]) => guard((value as (...a: unknown[]) => unknown).apply(target, args));
    },
  });
}
