// Which unhandled rejections the service survives: raw socket errors and the Postgres driver's "store away"
// errors (a driver's dropped promise on a failed connection), never an application error.
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { isDriverStoreFailure } from '../../src/adapters/postgres/errors.js';
import { isDroppedSocketError } from '../../src/adapters/telemetry/dropped-store-errors.js';

const systemError = (code: string, syscall?: string) => Object.assign(new Error(`${syscall ?? 'x'} ${code}`), { code, errno: -1, ...(syscall ? { syscall } : {}) });

describe('isDroppedSocketError', () => {
  it('accepts socket errors of a reset or unreachable connection', () => {
    expect(isDroppedSocketError(systemError('ECONNRESET', 'read'))).toBe(true);
    expect(isDroppedSocketError(systemError('EPIPE', 'write'))).toBe(true);
    expect(isDroppedSocketError(systemError('ECONNREFUSED', 'connect'))).toBe(true);
  });

  it('refuses everything else: application errors, codes without a syscall, other system errors, non-errors', () => {
    expect(isDroppedSocketError(new Error('boom'))).toBe(false);
    expect(isDroppedSocketError(new TypeError('x is undefined'))).toBe(false);
    expect(isDroppedSocketError(systemError('ECONNRESET'))).toBe(false); // a code copied onto an app error
    expect(isDroppedSocketError(systemError('ENOENT', 'open'))).toBe(false);
    expect(isDroppedSocketError(Object.assign(new Error('pg'), { code: '57014' }))).toBe(false);
    expect(isDroppedSocketError({ code: 'ECONNRESET', syscall: 'read' })).toBe(false);
    expect(isDroppedSocketError(undefined)).toBe(false);
  });
});

describe('isDriverStoreFailure', () => {
  const pgError = (code: string) => Object.assign(new postgres.PostgresError({ message: 'x' } as never), { code });

  it('accepts what the driver raises when the store is away: pooler FATALs, shutdowns, its own connection errors', () => {
    expect(isDriverStoreFailure(pgError('08P01'))).toBe(true); // PgBouncer: server_login_retry
    expect(isDriverStoreFailure(pgError('57P01'))).toBe(true); // admin shutdown
    expect(isDriverStoreFailure(pgError('25006'))).toBe(true); // read-only
    expect(isDriverStoreFailure(pgError('28000'))).toBe(true); // a role set NOLOGIN after start
    expect(isDriverStoreFailure(pgError('28P01'))).toBe(true); // a password rotated after start
    expect(isDriverStoreFailure(Object.assign(new Error('write CONNECTION_CLOSED'), { code: 'CONNECTION_CLOSED' }))).toBe(true);
    expect(isDriverStoreFailure(Object.assign(new Error('write CONNECT_TIMEOUT'), { code: 'CONNECT_TIMEOUT' }))).toBe(true);
  });

  it('refuses a driver error that is a bug, and application errors carrying a store-like code', () => {
    expect(isDriverStoreFailure(pgError('42P01'))).toBe(false); // undefined_table
    expect(isDriverStoreFailure(pgError('23505'))).toBe(false);
    expect(isDriverStoreFailure(Object.assign(new Error('app'), { code: '08P01' }))).toBe(false);
    expect(isDriverStoreFailure({ code: 'CONNECTION_CLOSED' })).toBe(false);
    expect(isDriverStoreFailure(undefined)).toBe(false);
  });
});
