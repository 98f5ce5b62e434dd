// The bench's statistics: medians, min–max and the verdict that reports noise instead of a pass.
import { describe, expect, it } from 'vitest';
import { formatSpread, pairedRatios, spread, verdict } from '../../bench/lib/stats.js';

describe('spread', () => {
  it('gives the median of an odd count, with min and max', () => {
    expect(spread([3, 1, 2])).toEqual({ median: 2, min: 1, max: 3, n: 3 });
  });
  it('averages the two middle values of an even count', () => {
    expect(spread([4, 1, 3, 2])).toEqual({ median: 2.5, min: 1, max: 4, n: 4 });
  });
  it('ignores non-finite values and answers null when nothing is left', () => {
    expect(spread([NaN, 5, Infinity])).toEqual({ median: 5, min: 5, max: 5, n: 1 });
    expect(spread([])).toBeNull();
  });
});

describe('verdict', () => {
  const atLeast = { op: '>=' as const, value: 0.85 };
  const atMost = { op: '<=' as const, value: 40 };

  it('passes when every round clears the target by more than the spread', () => {
    expect(verdict([0.9, 0.91, 0.92], atLeast)).toBe('PASS');
    expect(verdict([20, 22, 25], atMost)).toBe('PASS');
  });
  it('misses when every round falls short by more than the spread', () => {
    expect(verdict([0.7, 0.72, 0.73], atLeast)).toBe('MISS');
    expect(verdict([50, 52, 55], atMost)).toBe('MISS');
  });
  it('calls a min–max that straddles the target "within noise", whatever the median says', () => {
    expect(verdict([0.84, 0.9, 0.95], atLeast)).toBe('within noise');
    expect(verdict([0.8, 0.83, 0.86], atLeast)).toBe('within noise');
    expect(verdict([35, 39, 41], atMost)).toBe('within noise');
  });
  it('calls a spread wider than the margin to the target "within noise" even without straddling', () => {
    // median 0.87 is 0.02 above the target, but the rounds spread over 0.09
    expect(verdict([0.86, 0.87, 0.95], atLeast)).toBe('within noise');
  });
  it('judges a single round as measured, and nothing as n/a', () => {
    expect(verdict([0.9], atLeast)).toBe('PASS');
    expect(verdict([0.8], atLeast)).toBe('MISS');
    expect(verdict([], atLeast)).toBe('n/a');
  });
  it('passes an exact check only when every round meets it', () => {
    expect(verdict([0, 0, 0], { op: '=', value: 0 })).toBe('PASS');
    expect(verdict([0, 3, 0], { op: '=', value: 0 })).toBe('MISS');
  });
});

describe('pairedRatios and formatSpread', () => {
  it('divides round by round and skips incomplete pairs', () => {
    expect(pairedRatios([10, 20, undefined, 30], [5, 0, 1, 10])).toEqual([2, 3]);
  });
  it('prints the median with the min–max beside it', () => {
    expect(formatSpread(spread([1000, 1200, 1100]))).toBe('1,100 (1,000–1,200)');
    expect(formatSpread(spread([0.5]), 2)).toBe('0.50');
    expect(formatSpread(null)).toBe('-');
  });
});
