// Key-state computation: the pure function every instance runs to agree on which key signs.
import { describe, expect, it } from 'vitest';
import { computeKeyStates } from '../../src/core/keys/key-states.js';
import type { SigningKeyRow } from '../../src/core/model.js';

const KEEP_MS = 1_000_000;
const T0 = Date.UTC(2026, 0, 1);

function key(kid: string, activatesAt: number, retiredAt: number | null = null): SigningKeyRow {
  return {
    kid,
    publicJwk: { kty: 'RSA', n: 'n', e: 'AQAB' },
    privateKeyEncrypted: '',
    createdAt: new Date(activatesAt - 1),
    activatesAt: new Date(activatesAt),
    retiredAt: retiredAt === null ? null : new Date(retiredAt),
  };
}

const statesOf = (rows: SigningKeyRow[], now: number) =>
  Object.fromEntries(computeKeyStates(rows, now, KEEP_MS).map((s) => [s.row.kid, s.state]));

describe('computeKeyStates', () => {
  it('a single activated key is active; a future one is next', () => {
    expect(statesOf([key('a', T0), key('b', T0 + 10)], T0 + 5)).toEqual({ a: 'active', b: 'next' });
  });

  it('the newest activated key signs; its predecessor is retiring until TTL + skew after the switch', () => {
    const rows = [key('a', T0), key('b', T0 + 10)];
    expect(statesOf(rows, T0 + 10)).toEqual({ a: 'retiring', b: 'active' });
    expect(statesOf(rows, T0 + 10 + KEEP_MS - 1)).toEqual({ a: 'retiring', b: 'active' });
    expect(statesOf(rows, T0 + 10 + KEEP_MS)).toEqual({ a: 'retired', b: 'active' });
    const retiring = computeKeyStates(rows, T0 + 20, KEEP_MS).find((s) => s.row.kid === 'a')!;
    expect(retiring.deactivatedAt?.getTime()).toBe(T0 + 10);
    expect(retiring.retiresAt?.getTime()).toBe(T0 + 10 + KEEP_MS);
  });

  it('retiring the active key by hand hands signing back to the previous key', () => {
    const rows = [key('a', T0), key('b', T0 + 10, T0 + 20)];
    expect(statesOf(rows, T0 + 30)).toEqual({ a: 'active', b: 'retired' });
  });

  it('a manual retirement takes effect at its time, not before', () => {
    const rows = [key('a', T0), key('b', T0 + 10, T0 + 50)];
    expect(statesOf(rows, T0 + 30)).toEqual({ a: 'retiring', b: 'active' });
    expect(statesOf(rows, T0 + 50)).toEqual({ a: 'active', b: 'retired' });
  });

  it('a next key retired before it activates never becomes active', () => {
    const rows = [key('a', T0), key('b', T0 + 100, T0 + 50)];
    expect(statesOf(rows, T0 + 60)).toEqual({ a: 'active', b: 'retired' });
    expect(statesOf(rows, T0 + 200)).toEqual({ a: 'active', b: 'retired' });
  });

  it('equal activation times are ordered by kid, the same on every instance', () => {
    const rows = [key('b', T0), key('a', T0)];
    expect(statesOf(rows, T0)).toEqual({ a: 'retiring', b: 'active' });
    expect(statesOf([...rows].reverse(), T0)).toEqual({ a: 'retiring', b: 'active' });
  });

  it('no activated key: nothing is active', () => {
    expect(statesOf([key('a', T0 + 10)], T0)).toEqual({ a: 'next' });
  });
});
