// Waiting between retries: the server's Retry-After when it gives one (never shorter), plus jitter so
// that many clients refused together do not come back together; exponential with jitter otherwise.
// A call retries until its wait budget (time, not a count) is spent: a fleet restarting at once is
// refused for as long as the service needs to verify it, however many answers that takes.

/** Retry-After as milliseconds (delta-seconds or HTTP-date), or undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // Anything else must be an HTTP-date (it names a day or month); Date.parse alone would read "-1" or "1.5".
  if (!/[A-Za-z]{3}/.test(text)) return undefined;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

export interface BackoffPolicy {
  /** First step of the exponential backoff when no Retry-After is given. */
  baseDelayMs: number;
  /** Longest wait the client accepts; a longer Retry-After ends the retries. */
  maxDelayMs: number;
  /**
   * Longest step of the exponential backoff (no Retry-After), when lower than maxDelayMs: an agent that
   * could not reach a restarting service comes back within this long once it is up. Default maxDelayMs.
   */
  maxBackoffMs?: number;
}

/**
 * Delay before retry number `attempt` (0-based), or undefined when the server asks for longer than the
 * policy allows. Jitter is added on top of Retry-After (up to 20%, at least 100 ms), never taken off it.
 */
export function retryDelayMs(attempt: number, retryAfterMs: number | undefined, policy: BackoffPolicy): number | undefined {
  if (retryAfterMs !== undefined) {
    if (retryAfterMs > policy.maxDelayMs) return undefined;
    return retryAfterMs + Math.random() * Math.max(100, retryAfterMs * 0.2);
  }
  const cap = Math.min(policy.maxDelayMs, policy.maxBackoffMs ?? policy.maxDelayMs);
  // 2 ** attempt overflows to Infinity for long outages; min() keeps the cap.
  const ceiling = Math.min(cap, policy.baseDelayMs * 2 ** Math.min(attempt, 52));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

export interface RetryPolicy extends BackoffPolicy {
  /** Time after the first attempt during which retries may start (the wait budget). */
  maxWaitMs: number;
  /** Optional extra bound: at most this many retries (undefined: only the budget bounds them). */
  maxRetries?: number;
}

/** Why a call stopped retrying. */
export type GiveUpReason = 'maxWaitMs' | 'maxRetries' | 'maxRetryDelaySeconds';

export type RetryPlan = { wait: number } | { giveUp: GiveUpReason };

/**
 * The retries of one call: created before its first attempt, asked after each retryable failure how long
 * to wait, or why to stop. A Retry-After that ends after the budget stops the call at once (waiting
 * would only delay the same failure); a backoff step is shortened to fit the budget, so the last
 * attempt starts no later than the budget's end.
 */
export class RetrySchedule {
  readonly startedAt: number;
  #retries = 0;

  constructor(
    private readonly policy: RetryPolicy,
    private readonly now: () => number = Date.now,
  ) {
    this.startedAt = now();
  }

  /** Retries made so far. */
  get retries(): number {
    return this.#retries;
  }

  next(retryAfterMs: number | undefined): RetryPlan {
    const { maxRetries, maxWaitMs } = this.policy;
    if (maxRetries !== undefined && this.#retries >= maxRetries) return { giveUp: 'maxRetries' };
    const left = this.startedAt + maxWaitMs - this.now();
    if (retryAfterMs !== undefined && retryAfterMs > this.policy.maxDelayMs) return { giveUp: 'maxRetryDelaySeconds' };
    if (left <= 0 || (retryAfterMs !== undefined && retryAfterMs > left)) return { giveUp: 'maxWaitMs' };
    const delay = retryDelayMs(this.#retries, retryAfterMs, this.policy)!;
    this.#retries++;
    // Jitter and backoff give way to the budget; Retry-After itself fits (checked above).
    return { wait: Math.min(delay, left) };
  }
}

export function sleep(ms: number, signal?: AbortSignal | null): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
