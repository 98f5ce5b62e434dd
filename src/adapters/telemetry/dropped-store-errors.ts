// A store failure at the wrong moment must not end the process. The drivers drop some of their own promises:
// postgres.js (3.4) the array-type query it runs on every new connection (connection.js fetchArrayTypes), the
// session-state query of `target_session_attrs`, and a CancelRequest's connection. When such a connection
// fails, its error rejects a promise nobody holds, and Node's default for an unhandled rejection is to exit:
// a black-holed database that comes back resets its connections (admin-write-deadline.test.ts), and PgBouncer
// answers every new connection with FATAL `server_login_retry` (08P01) while its Postgres is down: every
// instance died within 1.6 s. Such a rejection carries nothing to answer: the pool reconnects on its next
// query, and the request that needed it got its own 503. It is logged (a warning); every other unhandled
// rejection (a bug) still ends the process, as before.
import type { Logger } from './logger.js';

const SOCKET_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNREFUSED', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNABORTED']);

/** A raw socket error (a system error with a socket code and syscall), not an application error. */
export function isDroppedSocketError(reason: unknown): boolean {
  if (!(reason instanceof Error)) return false;
  const { code, syscall } = reason as NodeJS.ErrnoException;
  return typeof code === 'string' && SOCKET_CODES.has(code) && typeof syscall === 'string';
}

export interface StoreFailureTolerance {
  logger: Logger;
  /** A store driver's error that says "the store is away, try again" (the adapters decide: postgres/errors.ts). */
  isStoreFailure: (reason: unknown) => boolean;
}

export function tolerateDroppedStoreErrors({ logger, isStoreFailure }: StoreFailureTolerance): void {
  process.on('unhandledRejection', (reason) => {
    const kind = isDroppedSocketError(reason) ? 'socket' : isStoreFailure(reason) ? 'store' : undefined;
    if (kind) {
      const { code, syscall } = reason as NodeJS.ErrnoException;
      logger.warn({ code, syscall, kind }, 'a store connection failed under a promise nobody held (driver); reconnecting');
      return;
    }
    // What Node does without this hook: the rejection becomes an uncaught exception.
    process.nextTick(() => {
      throw reason;
    });
  });
}
