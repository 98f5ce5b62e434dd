// The verified-secret memory: exact secret only, forgotten on any change, never stored across an
// invalidation that happened during the argon2 check, bounded by the grace period of a previous secret.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { VerifiedCredentials } from '../../src/core/credentials/verified-cache.js';

afterEach(() => vi.useRealTimers());

describe('VerifiedCredentials', () => {
  it('matches the exact secret of the exact key only', () => {
    const verified = new VerifiedCredentials({ maxEntries: 10, ttlMs: 60_000 });
    verified.remember('k1', 's1', 'agent-1', verified.generation, 'hash');
    expect(verified.match('k1', 's1')).toBe('agent-1');
    expect(verified.match('k1', 's1x')).toBeUndefined();
    expect(verified.match('k2', 's1')).toBeUndefined();
  });

  it('refuses to remember a check that raced an invalidation, and forgets on change', () => {
    const verified = new VerifiedCredentials({ maxEntries: 10, ttlMs: 60_000 });
    const generation = verified.generation; // argon2 check starts…
    verified.forget('k1'); // …the agent changes meanwhile
    verified.remember('k1', 's1', 'agent-1', generation, 'hash');
    expect(verified.match('k1', 's1')).toBeUndefined();
    verified.remember('k1', 's1', 'agent-1', verified.generation, 'hash');
    verified.forget('k1');
    expect(verified.match('k1', 's1')).toBeUndefined();
  });

  it('keeps two secrets per key (rotation grace), the previous one only until its grace ends', () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const verified = new VerifiedCredentials({ maxEntries: 10, ttlMs: 60_000 });
    verified.remember('k1', 'old', 'agent-1', verified.generation, 'hash-old', Date.now() + 5_000);
    verified.remember('k1', 'new', 'agent-1', verified.generation, 'hash');
    expect(verified.match('k1', 'old')).toBe('agent-1');
    vi.advanceTimersByTime(5_001);
    expect(verified.match('k1', 'old')).toBeUndefined();
    expect(verified.match('k1', 'new')).toBe('agent-1');
    vi.advanceTimersByTime(60_000);
    expect(verified.match('k1', 'new')).toBeUndefined();
  });

  it('is bounded: the least recently remembered key goes first; size 0 remembers nothing', () => {
    const verified = new VerifiedCredentials({ maxEntries: 2, ttlMs: 60_000 });
    for (const k of ['a', 'b', 'c']) verified.remember(k, 's', k, verified.generation, 'hash');
    expect(verified.match('a', 's')).toBeUndefined();
    expect(verified.match('c', 's')).toBe('c');
    const none = new VerifiedCredentials({ maxEntries: 0, ttlMs: 60_000 });
    none.remember('a', 's', 'a', none.generation, 'hash');
    expect(none.match('a', 's')).toBeUndefined();
  });

  it('clear also refuses a check that raced it', () => {
    const verified = new VerifiedCredentials({ maxEntries: 10, ttlMs: 60_000 });
    const generation = verified.generation;
    verified.clear();
    verified.remember('k1', 's1', 'agent-1', generation, 'hash');
    expect(verified.match('k1', 's1')).toBeUndefined();
  });

  it('a third secret for a key pushes out the oldest', () => {
    const verified = new VerifiedCredentials({ maxEntries: 10, ttlMs: 60_000 });
    for (const secret of ['s1', 's2', 's3']) verified.remember('k1', secret, 'agent-1', verified.generation, 'hash');
    expect(['s1', 's2', 's3'].map((s) => verified.match('k1', s))).toEqual([undefined, 'agent-1', 'agent-1']);
  });

  it('the bound evicts the least recently remembered key: a match does not keep a key', () => {
    const verified = new VerifiedCredentials({ maxEntries: 2, ttlMs: 60_000 });
    verified.remember('a', 's', 'a', verified.generation, 'hash');
    verified.remember('b', 's', 'b', verified.generation, 'hash');
    expect(verified.match('a', 's')).toBe('a');
    verified.remember('c', 's', 'c', verified.generation, 'hash');
    expect(['a', 'b', 'c'].map((k) => verified.match(k, 's'))).toEqual([undefined, 'b', 'c']);
  });

  it('after a possible missed invalidation an entry is re-checked against the hashes, not forgotten', () => {
    const verified = new VerifiedCredentials({ maxEntries: 10, ttlMs: 60_000 });
    verified.remember('k1', 's1', 'agent-1', verified.generation, 'hash-a');
    verified.remember('k2', 's2', 'agent-2', verified.generation, 'hash-b');
    verified.recheckAll();
    expect(verified.match('k1', 's1')).toBeUndefined();
    expect(verified.needsRecheck('k1', 's1')).toBe(true);
    expect(verified.needsRecheck('k1', 'wrong')).toBe(false);
    // Still the same hash: good again, without argon2.
    expect(verified.recheck('k1', 's1', ['hash-a'], verified.generation)).toBe(0);
    expect(verified.match('k1', 's1')).toBe('agent-1');
    // The hash changed (a rotation this process did not hear of): forgotten.
    expect(verified.recheck('k2', 's2', ['hash-c'], verified.generation)).toBe(-1);
    expect(verified.needsRecheck('k2', 's2')).toBe(false);
    expect(verified.match('k2', 's2')).toBeUndefined();
  });

  it('a re-check or a verification that raced a new re-check epoch leaves the entry to be re-checked', () => {
    const verified = new VerifiedCredentials({ maxEntries: 10, ttlMs: 60_000 });
    const stamp = verified.generation; // hashes read…
    verified.recheckAll(); // …then invalidations may have been missed
    verified.remember('k1', 's1', 'agent-1', stamp, 'hash-a');
    expect(verified.match('k1', 's1')).toBeUndefined();
    expect(verified.needsRecheck('k1', 's1')).toBe(true);
    const before = verified.generation;
    verified.recheckAll();
    expect(verified.recheck('k1', 's1', ['hash-a'], before)).toBe(0);
    expect(verified.needsRecheck('k1', 's1')).toBe(true);
  });

  it('a zero TTL remembers nothing', () => {
    const verified = new VerifiedCredentials({ maxEntries: 10, ttlMs: 0 });
    verified.remember('k1', 's1', 'agent-1', verified.generation, 'hash');
    expect(verified.match('k1', 's1')).toBeUndefined();
  });
});
