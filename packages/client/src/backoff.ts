// Waiting between retries: the server's Retry-After when it gives one (never shorter), plus jitter so
// that many clients refused together do not come back together; exponential with jitter otherwise.

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
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** attempt);
  return ceiling / 2 + Math.random() * (ceiling / 2);
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
