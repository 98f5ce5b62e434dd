// The client's retry timing: Retry-After honoured (never shortened), exponential backoff with jitter otherwise.
import { describe, expect, it } from 'vitest';
import { parseRetryAfter, retryDelayMs } from '../../packages/client/src/backoff.js';

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
