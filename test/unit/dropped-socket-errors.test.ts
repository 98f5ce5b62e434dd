// Which unhandled rejections the service survives: only raw socket errors (a driver's dropped promise on a
// reset connection), never an application error.
import { describe, expect, it } from 'vitest';
import { isDroppedSocketError } from '../../src/adapters/telemetry/dropped-socket-errors.js';

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
