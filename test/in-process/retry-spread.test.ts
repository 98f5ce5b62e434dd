// Retry-After of shed argon2 work: 1 s while the next second has room, then callers are booked into
// the coming seconds at the pool's rate, never beyond the maximum.
import { describe, expect, it } from 'vitest';
import { PoolCapacity, RetrySpread } from '../../src/adapters/crypto/retry-spread.js';

function at(rate: number, maxSeconds: number) {
  let now = 100_000;
  const spread = new RetrySpread({ maxSeconds, rate: () => rate, now: () => now });
  return { spread, advance: (ms: number) => (now += ms) };
}

describe('RetrySpread', () => {
  it('answers 1 second while refusals stay within the rate', () => {
    const { spread } = at(50, 30);
    for (let i = 0; i < 50; i++) expect(spread.next()).toBe(1);
  });

  it('books a burst into the coming seconds at the rate, in order', () => {
    const { spread } = at(40, 30);
    const waits = Array.from({ length: 200 }, () => spread.next());
    expect(waits.filter((w) => w === 1)).toHaveLength(40);
    expect(waits.filter((w) => w === 5)).toHaveLength(40);
    expect(waits[199]).toBe(5);
    expect([...waits].sort((a, b) => a - b)).toEqual(waits); // first refused, first back
  });

  it('never answers more than maxSeconds', () => {
    const { spread } = at(10, 30);
    const waits = Array.from({ length: 1000 }, () => spread.next());
    expect(Math.max(...waits)).toBe(30);
    expect(Math.min(...waits)).toBe(1);
  });

  it('books after the work already waiting: from notBeforeSeconds on, at the rate', () => {
    const { spread } = at(10, 30);
    const waits = Array.from({ length: 20 }, () => spread.next(4.2));
    expect(waits.filter((w) => w === 5)).toHaveLength(10);
    expect(waits.filter((w) => w === 6)).toHaveLength(10);
    expect(spread.next(0.3)).toBe(1); // under a second of work waiting: the next second
    expect(spread.next(90)).toBe(30);
  });

  it('frees the seconds that have passed', () => {
    const { spread, advance } = at(10, 30);
    for (let i = 0; i < 100; i++) spread.next(); // seconds +1..+10 full
    advance(10_000);
    expect(spread.next()).toBe(1);
  });
});

describe('PoolCapacity', () => {
  it('is threads × 1000 / mean run time, read at most once a second, kept while no task ran', () => {
    let now = 50_000;
    const means = [NaN, 25, 0, 20];
    let reads = 0;
    const capacity = new PoolCapacity({ threads: 2, takeMeanRunMs: () => means[reads++], initialPerThread: 40, now: () => now });
    expect(capacity.perSecond()).toBe(80); // no task yet: the assumption (2 threads × 40)
    now += 1000;
    expect(capacity.perSecond()).toBe(80); // 25 ms per task on 2 threads
    expect(capacity.perSecond()).toBe(80);
    expect(reads).toBe(2); // not read again within the second
    now += 1000;
    expect(capacity.perSecond()).toBe(80); // a second without tasks keeps the last estimate
    now += 1000;
    expect(capacity.perSecond()).toBe(100); // faster tasks raise it at once
  });

  it('follows slower tasks down by at most 10 % a reading: a burst does not book the next minute at its pace', () => {
    let now = 0;
    const capacity = new PoolCapacity({ threads: 2, takeMeanRunMs: () => 80, initialPerThread: 40, now: () => now }); // every reading: 80 ms a task, i.e. 25/s
    const readings = Array.from({ length: 30 }, () => {
      now += 1000;
      return capacity.perSecond();
    });
    expect(readings[0]).toBeCloseTo(72); // 80 × 0.9, not 25
    expect(readings[1]).toBeCloseTo(64.8);
    for (let i = 1; i < readings.length; i++) expect(readings[i]).toBeLessThanOrEqual(readings[i - 1]);
    expect(readings[29]).toBe(25); // a lasting slowdown is followed all the way
  });

  it('does not mistake a quiet pool for a slow one (the demand is not the capacity)', () => {
    // One task of 30 ms in the last second: the pool could do 2 × 1000 / 30 per second, not 1.
    const capacity = new PoolCapacity({ threads: 2, takeMeanRunMs: () => 30, initialPerThread: 20, now: () => 0 }); // assumed 40/s before: the reading is above
    expect(Math.round(capacity.perSecond())).toBe(67);
  });
});

describe('RetrySpread overbooking', () => {
  it('books rate × overbook per second', () => {
    const spread = new RetrySpread({ maxSeconds: 30, rate: () => 50, overbook: 1.2, now: () => 0 });
    const waits = Array.from({ length: 120 }, () => spread.next());
    expect(waits.filter((w) => w === 1)).toHaveLength(60);
    expect(waits.filter((w) => w === 2)).toHaveLength(60);
  });
});
