// A Postgres connection reset at the wrong moment must not end the process. postgres.js (3.4) drops two of
// its own promises: the array-type query it runs on every new connection (connection.js fetchArrayTypes)
// and a CancelRequest's connection. When such a connection is reset, the socket error rejects a promise
// nobody holds, and Node's default for an unhandled rejection is to exit: a black-holed database that comes
// back resets its connections, and the service died (admin-write-deadline.test.ts, about one run in two).
// Such a rejection carries nothing to answer: the pool reconnects on its next query. It is logged and
// counted as tolerated; every other unhandled rejection still ends the process, as before.
import type { Logger } from './logger.js';

const SOCKET_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNREFUSED', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNABORTED']);

/** A raw socket error (a system error with a socket code and syscall), not an application error. */
export function isDroppedSocketError(reason: unknown): boolean {
  if (!(reason instanceof Error)) return false;
  const { code, syscall } = reason as NodeJS.ErrnoException;
  return typeof code === 'string' && SOCKET_CODES.has(code) && typeof syscall === 'string';
}

export function tolerateDroppedSocketErrors(logger: Logger): void {
  process.on('unhandledRejection', (reason) => {
    if (isDroppedSocketError(reason)) {
      const { code, syscall } = reason as NodeJS.ErrnoException;
      logger.warn({ code, syscall }, 'a store connection was reset under a promise nobody held (driver); reconnecting');
      return;
    }
    // What Node does without this hook: the rejection becomes an uncaught exception.
    process.nextTick(() => {
      throw reason;
    });
  });
}
