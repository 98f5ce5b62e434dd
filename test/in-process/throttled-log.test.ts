// A message repeated many times a second (a full Redis fails every cache write, each failure flipping
// the cache's trust) is logged once at once, then as one line per interval carrying the count.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ThrottledLog } from '../../src/adapters/telemetry/throttled-log.js';

type Line = { level: string; fields: Record<string, unknown>; message: string };

function recorder() {
  const lines: Line[] = [];
  const logger = {
    info: (fields: Record<string, unknown>, message: string) => lines.push({ level: 'info', fields, message }),
    warn: (fields: Record<string, unknown>, message: string) => lines.push({ level: 'warn', fields, message }),
  };
  return { lines, logger: logger as never };
}

describe('ThrottledLog', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('93 failures in 12 s: one line at once, then one line per interval with the count of repeats', () => {
    const { lines, logger } = recorder();
    const log = new ThrottledLog({ logger, intervalMs: 10_000 });
    for (let i = 0; i < 93; i++) {
      log.log('warn', { why: 'cache_set failed' }, 'Redis cache bypassed until swept (reads go to Postgres)');
      vi.advanceTimersByTime(129); // 93 × 129 ms ≈ 12 s
    }
    vi.advanceTimersByTime(10_000);
    expect(lines.map((l) => l.fields.repeated ?? 1)).toEqual([1, expect.any(Number), expect.any(Number)]);
    expect(lines.reduce((sum, l) => sum + Number(l.fields.repeated ?? 1), 0)).toBe(93);
    expect(lines.every((l) => l.level === 'warn' && l.fields.why === 'cache_set failed')).toBe(true);
    expect(lines[1]!.fields.interval_ms).toBe(10_000);
  });

  it('each message is throttled on its own, and a quiet message is logged at once again after the interval', () => {
    const { lines, logger } = recorder();
    const log = new ThrottledLog({ logger, intervalMs: 1000 });
    log.log('warn', {}, 'bypassed');
    log.log('info', {}, 'in use again');
    log.log('warn', {}, 'bypassed');
    expect(lines.map((l) => l.message)).toEqual(['bypassed', 'in use again']);
    vi.advanceTimersByTime(1000);
    expect(lines.map((l) => [l.message, l.fields.repeated])).toEqual([['bypassed', undefined], ['in use again', undefined], ['bypassed', 1]]);
    vi.advanceTimersByTime(5000);
    log.log('info', {}, 'in use again');
    expect(lines.at(-1)).toEqual({ level: 'info', fields: {}, message: 'in use again' });
  });
});
