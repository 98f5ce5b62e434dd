// Retry-After for work shed because the argon2 queue is full. A fleet restarting at once (thousands of
// agents with cold credentials) meets a queue of a few dozen places: told "1 second" each, they all come
// back together every second, and answering those refusals takes the CPU that argon2 needs. Instead each
// refusal books the caller into the earliest coming second that still has room, a second holding as many
// returns as the pool verifies per second: callers come back about as fast as argon2 can take them, in the
// order they were refused, and the last one is not left waiting behind an idle pool.

export interface RetrySpreadOptions {
  /** Longest Retry-After given (clients give up beyond their own limit; the agent client's default is 60). */
  maxSeconds: number;
  /** argon2 verifications per second the pool can do (PoolCapacity). */
  rate: () => number;
  /**
   * Returns booked per second, relative to the rate. Slightly over 1: clients add jitter on top of
   * Retry-After (the agent client up to 20 %), which spreads each second's returns over a longer span, and
   * the queue absorbs the excess; an idle pool while callers wait would cost more than a few re-refusals.
   */
  overbook?: number;
  now?: () => number;
}

export class RetrySpread {
  /** Returns booked per absolute second (epoch seconds); only the coming maxSeconds are kept. */
  private readonly booked = new Map<number, number>();
  private readonly now: () => number;

  constructor(private readonly options: RetrySpreadOptions) {
    this.now = options.now ?? Date.now;
  }

  /**
   * Seconds to put in the Retry-After of one refusal: the earliest second with room, from `notBeforeSeconds`
   * on (the time the work already waiting takes), and at least 1.
   */
  next(notBeforeSeconds = 0): number {
    const second = Math.floor(this.now() / 1000);
    for (const at of this.booked.keys()) if (at <= second) this.booked.delete(at);
    const perSecond = Math.max(1, Math.round(this.options.rate() * (this.options.overbook ?? 1)));
    for (let wait = Math.max(1, Math.ceil(notBeforeSeconds)); wait <= this.options.maxSeconds; wait++) {
      const count = this.booked.get(second + wait) ?? 0;
      if (count < perSecond) {
        this.booked.set(second + wait, count + 1);
        return wait;
      }
    }
    return this.options.maxSeconds;
  }
}

/**
 * What the pool can verify per second: threads × 1000 / mean time a task spends in a thread (Piscina's
 * run-time histogram, queue wait excluded), read at most once a second over the tasks of that second.
 * Counting completions instead measures the demand of a pool that is not saturated: one agent created a
 * second before a fleet restart made the whole fleet wait 30 s, booked one caller per second.
 *
 * A reading may raise the estimate at once but lower it by at most FALL_PER_READING. The estimate books
 * seconds up to a minute ahead, and the seconds a fleet restart is refused in are the worst to measure:
 * thousands of connections and requests arriving at once slow the first verifications several times over,
 * then the burst passes. Taken as they were, those readings booked a 5,000-agent restart at ~25/s while
 * the pool could do ~75/s once the burst had passed: the pool sat idle for 45 s with the line empty,
 * then the wave booked at the longest wait came back together. The two errors do not cost the same: an
 * idle pool wastes what argon2 could have done, while an overbooked second costs a few refusals more.
 */
export interface PoolCapacityOptions {
  readonly threads: number;
  /** Mean run time (ms) of the tasks since the last reset, or NaN/0 when there were none; then resets. */
  readonly takeMeanRunMs: () => number;
  /** Verifications per second per thread assumed before any task ran. */
  initialPerThread: number;
  readonly now?: () => number;
}

export class PoolCapacity {
  /** Fraction of the estimate kept, at least, from one reading to the next. */
  static readonly FALL_PER_READING = 0.9;
  private perSecondValue: number;
  private readAt = -Infinity;
  private readonly threads: number;
  private readonly takeMeanRunMs: () => number;
  private readonly now: () => number;

  constructor({ threads, takeMeanRunMs, initialPerThread, now = Date.now }: PoolCapacityOptions) {
    this.threads = threads;
    this.takeMeanRunMs = takeMeanRunMs;
    this.now = now;
    this.perSecondValue = threads * initialPerThread;
  }

  perSecond(): number {
    const now = this.now();
    if (now - this.readAt >= 1000) {
      this.readAt = now;
      const ms = this.takeMeanRunMs();
      if (Number.isFinite(ms) && ms > 0) {
        this.perSecondValue = Math.max((this.threads * 1000) / ms, this.perSecondValue * PoolCapacity.FALL_PER_READING);
      }
    }
    return this.perSecondValue;
  }
}
