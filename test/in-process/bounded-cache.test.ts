// BoundedCache (the in-process caches' map): bounded, time-limited, and never storing a value read before an invalidation.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BoundedCache } from '../../src/core/support/bounded-cache.js';

afterEach(() => vi.useRealTimers());

describe('BoundedCache', () => {
  it('a value loaded before an invalidation is not stored after it (the read/invalidate race)', () => {
    const cache = new BoundedCache<string>({ maxEntries: 10, ttlMs: 60_000 });
    const generation = cache.generation; // a reader starts loading 'a' from the store…
    cache.delete('a'); // …an invalidation arrives meanwhile…
    cache.set('a', 'stale', generation); // …and the reader's (now stale) value must be dropped.
    expect(cache.get('a')).toBeUndefined();
    cache.set('a', 'fresh', cache.generation);
    expect(cache.get('a')).toBe('fresh');
  });

  it('deleteWhere and clear also close the race', () => {
    const cache = new BoundedCache<string>({ maxEntries: 10, ttlMs: 60_000 });
    let generation = cache.generation;
    cache.deleteWhere(() => false);
    cache.set('a', 'stale', generation);
    expect(cache.get('a')).toBeUndefined();
    generation = cache.generation;
    cache.clear();
    cache.set('a', 'stale', generation);
    expect(cache.get('a')).toBeUndefined();
  });

  it('deleteWhere removes exactly the matching entries', () => {
    const cache = new BoundedCache<number>({ maxEntries: 10, ttlMs: 60_000 });
    for (const [k, v] of [['a', 1], ['b', 2], ['c', 3]] as const) cache.set(k, v);
    cache.deleteWhere((_, v) => v % 2 === 1);
    expect([cache.get('a'), cache.get('b'), cache.get('c')]).toEqual([undefined, 2, undefined]);
  });

  it('evicts the least recently used entry beyond its bound', () => {
    const cache = new BoundedCache<number>({ maxEntries: 2, ttlMs: 60_000 });
    cache.set('a', 1);
    cache.set('b', 2);
    cache.get('a'); // 'b' is now the least recently used
    cache.set('c', 3);
    expect([cache.get('a'), cache.get('b'), cache.get('c')]).toEqual([1, undefined, 3]);
  });

  it('entries expire after their time to live', () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const cache = new BoundedCache<number>({ maxEntries: 10, ttlMs: 1000 });
    cache.set('a', 1);
    cache.set('b', 2, cache.generation, 5000);
    vi.setSystemTime(1_000_999);
    expect(cache.get('a')).toBe(1);
    vi.setSystemTime(1_001_000);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('b')).toBe(2);
  });

  it('a zero-sized cache or a non-positive TTL stores nothing', () => {
    const none = new BoundedCache<number>({ maxEntries: 0, ttlMs: 1000 });
    none.set('a', 1);
    expect(none.get('a')).toBeUndefined();
    const cache = new BoundedCache<number>({ maxEntries: 10, ttlMs: 1000 });
    cache.set('a', 1, cache.generation, 0);
    expect(cache.get('a')).toBeUndefined();
  });

  it('peek reads a live value without making it the most recently used', () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const cache = new BoundedCache<number>({ maxEntries: 2, ttlMs: 1000 });
    cache.set('a', 1);
    cache.set('b', 2);
    expect(cache.peek('a')).toBe(1); // 'a' stays the least recently used…
    cache.set('c', 3); // …so it is the one evicted
    expect([cache.peek('a'), cache.peek('b'), cache.peek('c')]).toEqual([undefined, 2, 3]);
    vi.setSystemTime(1_001_000);
    expect(cache.peek('b')).toBeUndefined();
  });
});
