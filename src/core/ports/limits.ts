// Attempt limits the token exchange applies (adapters/ratelimit implements them with rate-limiter-flexible,
// shared through Redis when there is one). Both throw a 429 `rate_limited` ServiceError with Retry-After.

export interface AttemptLimits {
  /**
   * Counts one token request of an authenticated key. Undefined when it was answered at once, in
   * process (a point of a leased batch): the warm path waits on nothing.
   */
  consumeToken(apiKeyId: string): Promise<void> | undefined;
  /**
   * Reserves one point of the address's failed-authentication budget before any argon2 work. Throws 429:
   * for the rest of the window once failures spent the budget (a lockout), briefly while checks in flight
   * hold the points.
   */
  reserveAuthAttempt(address: string): Promise<AuthAttempt>;
  /** One failed authentication that reserved nothing first; throws 429 like reserveAuthAttempt. */
  recordAuthFailure(address: string): Promise<void>;
  /** Throws 429 while the address's failure budget is known spent; in memory, no I/O (warm path). */
  assertNotLockedOut(address: string): void;
}

/** A reserved point of the failure budget: settled once, by one of the two. */
export interface AuthAttempt {
  /** Succeeded, or failed for the service's own reasons: the point goes back. */
  refund(): void;
  /** The credentials were wrong: the point stays spent, as a failure (the last one locks the address out). */
  fail(): Promise<void>;
}
