// A 413 for a body refused mid-stream goes out once the client stops sending (or at a bound), once.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LingeringRefusal } from '../../src/adapters/http/lingering-refusal.js';

describe('LingeringRefusal', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const start = (finished = () => false) => {
    const answer = vi.fn();
    return { answer, refusal: new LingeringRefusal({ answer, finished }) };
  };

  it('answers at the end of the body, once', () => {
    const { answer, refusal } = start();
    refusal.received(4096, false);
    expect(answer).not.toHaveBeenCalled();
    refusal.received(10, true);
    vi.advanceTimersByTime(10_000);
    expect(answer).toHaveBeenCalledTimes(1);
  });

  it('answers after a quiet spell while the client keeps the body open', () => {
    const { answer, refusal } = start();
    for (let i = 0; i < 10; i++) {
      vi.advanceTimersByTime(LingeringRefusal.QUIET_MS - 50);
      refusal.received(4096, false); // still sending: no answer yet
    }
    expect(answer).not.toHaveBeenCalled();
    vi.advanceTimersByTime(LingeringRefusal.QUIET_MS);
    expect(answer).toHaveBeenCalledTimes(1);
  });

  it('answers at the byte or time bound for a client that never stops', () => {
    const bytes = start();
    bytes.refusal.received(LingeringRefusal.MAX_DISCARDED_BYTES + 1, false);
    expect(bytes.answer).toHaveBeenCalledTimes(1);
    const time = start();
    for (let t = 0; t < LingeringRefusal.MAX_MS; t += 50) {
      vi.advanceTimersByTime(50);
      time.refusal.received(1, false);
    }
    expect(time.answer).toHaveBeenCalledTimes(1);
  });

  it('never answers a request already finished (client gone)', () => {
    const { answer, refusal } = start(() => true);
    refusal.received(0, true);
    vi.advanceTimersByTime(10_000);
    expect(answer).not.toHaveBeenCalled();
  });
});
