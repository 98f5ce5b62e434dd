// Per-address budget of wrong admin tokens on the internal port (rate-limiter-flexible, shared through
// Redis when configured, like the public limits). Once an address has used it up, every admin request
// from it gets 429 until the window passes, the right token included: a guesser that happens to hit
// the token inside a blocked window learns nothing from the answer.
import type { RedisClient } from '../cache/index.js';
import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { makeLimiter, rateLimitedError } from './limiters.js';

export interface AdminAuthLimiterOptions {
  redis: RedisClient | undefined;
  keyPrefix: string;
  points: number;
  windowSeconds: number;
  /** The budget could not be read (Redis failing and no insurance answer): counted; the token check still runs. */
  onStoreFailure?: (operation: 'admin_limit_read') => void;
  /** A request refused because its address spent the budget: counted. */
  onRefusal: () => void;
}

export class AdminAuthLimiter {
  private readonly failures: RateLimiterAbstract;
  private readonly onStoreFailure: (operation: 'admin_limit_read') => void;
  private readonly onRefusal: () => void;

  constructor(options: AdminAuthLimiterOptions) {
    this.onStoreFailure = options.onStoreFailure ?? (() => undefined);
    this.onRefusal = options.onRefusal;
    this.failures = makeLimiter(options.redis, `${options.keyPrefix}rl:adminfail`, options.points, options.windowSeconds);
  }

  /** Throws 429 while the address has no failures left in the window (checked before the token). */
  async assertAllowed(address: string): Promise<void> {
    const res = await this.failures.get(address).catch(() => {
      this.onStoreFailure('admin_limit_read');
      return null;
    });
    if (res && res.remainingPoints <= 0 && res.msBeforeNext > 0) {
      this.onRefusal();
      throw rateLimitedError(res);
    }
  }

  /** Counts one wrong token; throws 429 when it goes past the budget. */
  async recordFailure(address: string): Promise<void> {
    try {
      await this.failures.consume(address);
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) {
        this.onRefusal();
        throw rateLimitedError(rejection);
      }
      // The store failed and no insurance answered: the 401 stands, not our fault to refuse harder.
    }
  }
}
