// The client's retry timing: Retry-After honoured (never shortened), exponential backoff with jitter otherwise,
// all within a wait budget in time (and an optional retry count).
import { describe, expect, it } from 'vitest';
import { parseRetryAfter, retryDelayMs, RetrySchedule } from '../../packages/client/src/backoff.js';

describe('parseRetryAfter', () => {
  it('reads delta-seconds and HTTP dates; ignores what it cannot read', () => {
    expect(parseRetryAfter('3')).toBe(3000);
    expect(parseRetryAfter(' 0 ')).toBe(0);
    const now = Date.parse('Mon, 23 Nov 2026 06:00:00 GMT');
    expect(parseRetryAfter('Mon, 23 Nov 2026 06:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('Mon, 23 Nov 2026 05:00:00 GMT', now)).toBe(0);
    for (const bad of [null, '', 'soon', '-1', '1.5']) expect(parseRetryAfter(bad)).toBeUndefined();
  });
});

describe('retryDelayMs', () => {
  const policy = { baseDelayMs: 100, maxDelayMs: 10_000 };

  it('waits at least Retry-After, with at most 20 % (≥ 100 ms) of jitter on top', () => {
    for (let i = 0; i < 200; i++) {
      const delay = retryDelayMs(0, 2000, policy)!;
      expect(delay).toBeGreaterThanOrEqual(2000);
      expect(delay).toBeLessThanOrEqual(2400);
      const small = retryDelayMs(0, 10, policy)!;
      expect(small).toBeGreaterThanOrEqual(10);
      expect(small).toBeLessThanOrEqual(110);
    }
  });

  it('gives up when the server asks for longer than the policy accepts', () => {
    expect(retryDelayMs(0, 10_001, policy)).toBeUndefined();
  });

  it('without Retry-After: exponential, jittered in the upper half, capped', () => {
    for (let i = 0; i < 200; i++) {
      for (const [attempt, ceiling] of [[0, 100], [3, 800], [20, 10_000]] as const) {
        const delay = retryDelayMs(attempt, undefined, policy)!;
        expect(delay).toBeGreaterThanOrEqual(ceiling / 2);
        expect(delay).toBeLessThanOrEqual(ceiling);
      }
    }
  });
});

describe('retryDelayMs with a backoff cap', () => {
  it('the exponential step stops at maxBackoffMs, while a Retry-After up to maxDelayMs is still accepted', () => {
    const policy = { baseDelayMs: 250, maxDelayMs: 60_000, maxBackoffMs: 10_000 };
    for (let i = 0; i < 100; i++) {
      const late = retryDelayMs(40, undefined, policy)!;
      expect(late).toBeGreaterThanOrEqual(5_000);
      expect(late).toBeLessThanOrEqual(10_000);
      expect(retryDelayMs(2_000, undefined, policy)).toBeLessThanOrEqual(10_000); // no overflow to NaN
    }
    expect(retryDelayMs(0, 45_000, policy)).toBeGreaterThanOrEqual(45_000);
  });
});

describe('RetrySchedule', () => {
  /** A clock the test moves by hand. */
  function clock() {
    let now = 1_000_000;
    return { now: () => now, advance: (ms: number) => (now += ms) };
  }
  const base = { baseDelayMs: 250, maxDelayMs: 60_000, maxBackoffMs: 10_000 };

  it('keeps retrying without a count until the wait budget is spent', () => {
    const time = clock();
    const schedule = new RetrySchedule({ ...base, maxWaitMs: 300_000 }, time.now);
    let retries = 0;
    for (;;) {
      const plan = schedule.next(undefined);
      if ('giveUp' in plan) {
        expect(plan.giveUp).toBe('maxWaitMs');
        break;
      }
      expect(plan.wait).toBeGreaterThan(0);
      time.advance(plan.wait);
      retries++;
    }
    // 5 minutes of backoff capped at 10 s (5-10 s a step once there): far more than the old 3 retries.
    expect(retries).toBeGreaterThanOrEqual(30);
    expect(time.now() - schedule.startedAt).toBe(300_000); // the last step was shortened to end on the budget
  });

  it('waits at least each Retry-After, and stops at once when one ends after the budget', () => {
    const time = clock();
    const schedule = new RetrySchedule({ ...base, maxWaitMs: 100_000 }, time.now);
    const first = schedule.next(60_000);
    expect('wait' in first && first.wait).toBeGreaterThanOrEqual(60_000);
    time.advance(60_000);
    expect(schedule.next(39_000)).toMatchObject({ wait: expect.any(Number) });
    time.advance(1_000);
    expect(schedule.next(45_000)).toEqual({ giveUp: 'maxWaitMs' }); // 39 s left
  });

  it('a Retry-After over maxDelayMs stops the call whatever the budget', () => {
    const schedule = new RetrySchedule({ ...base, maxWaitMs: 600_000 });
    expect(schedule.next(61_000)).toEqual({ giveUp: 'maxRetryDelaySeconds' });
  });

  it('maxRetries, when given, bounds the count as well', () => {
    const time = clock();
    const schedule = new RetrySchedule({ ...base, maxWaitMs: 300_000, maxRetries: 2 }, time.now);
    expect('wait' in schedule.next(1000)).toBe(true);
    expect('wait' in schedule.next(undefined)).toBe(true);
    expect(schedule.next(1000)).toEqual({ giveUp: 'maxRetries' });
    expect(schedule.retries).toBe(2);
  });

  it('a budget of 0 makes one attempt only', () => {
    const schedule = new RetrySchedule({ ...base, maxWaitMs: 0 });
    expect(schedule.next(undefined)).toEqual({ giveUp: 'maxWaitMs' });
  });
});
