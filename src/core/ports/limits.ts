// Attempt limits the token exchange applies (adapters/ratelimit implements them with rate-limiter-flexible,
// shared through Redis when there is one). Both throw a 429 `rate_limited` ServiceError with Retry-After.

export interface AttemptLimits {
  /** Counts one token request of an authenticated key. */
  consumeToken(apiKeyId: string): Promise<void>;
  /**
   * Reserves one point of the address's failed-authentication budget before any argon2 work. Returns the
   * refund, for an attempt that succeeded or failed for the service's own reasons.
   */
  reserveAuthAttempt(address: string): Promise<() => void>;
  /** Throws 429 while the address's failure budget is known spent; in memory, no I/O (warm path). */
  assertNotLockedOut(address: string): void;
}
