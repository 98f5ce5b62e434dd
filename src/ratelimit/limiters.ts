// Rate limits (rate-limiter-flexible): per api_key_id on authenticated token requests, and per client
// address on failed authentications. With Redis the counts are shared by every instance; when Redis is
// away an in-process insurance limiter takes over, so limiting never stops and never blocks on Redis.
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { ServiceError } from '../errors/catalog.js';

export interface LimiterOptions {
  redis: Redis | undefined;
  keyPrefix: string;
  tokenPoints: number;
  tokenWindowSeconds: number;
  authFailPoints: number;
  authFailWindowSeconds: number;
}

export type LimiterName = 'token_per_key' | 'auth_fail_per_address';

// The library joins keyPrefix and key with ':' itself.
export function makeLimiter(redis: Redis | undefined, keyPrefix: string, points: number, duration: number): RateLimiterAbstract {
  const memory = new RateLimiterMemory({ keyPrefix, points, duration });
  if (!redis) return memory;
  return new RateLimiterRedis({
    storeClient: redis,
    keyPrefix,
    points,
    duration,
    rejectIfRedisNotReady: true,
    insuranceLimiter: memory,
  });
}

export function rateLimitedError(res: RateLimiterRes): ServiceError {
  const retryAfter = Math.max(1, Math.ceil(res.msBeforeNext / 1000));
  return new ServiceError('rate_limited', undefined, { 'Retry-After': String(retryAfter) });
}

export class Limiters {
  private readonly token: RateLimiterAbstract;
  private readonly authFail: RateLimiterAbstract;

  constructor(options: LimiterOptions, private readonly onRefusal: (limiter: LimiterName) => void) {
    this.token = makeLimiter(options.redis, `${options.keyPrefix}rl:token`, options.tokenPoints, options.tokenWindowSeconds);
    this.authFail = makeLimiter(options.redis, `${options.keyPrefix}rl:authfail`, options.authFailPoints, options.authFailWindowSeconds);
  }

  /** Counts one token request for an authenticated key; throws 429 past the limit. */
  async consumeToken(apiKeyId: string): Promise<void> {
    await this.consume(this.token, 'token_per_key', apiKeyId);
  }

  /** Throws 429 if the address has used up its failed-authentication budget (checked before argon2 runs). */
  async assertAddressAllowed(address: string): Promise<void> {
    const res = await this.authFail.get(address).catch(() => null);
    if (res && res.remainingPoints <= 0 && res.msBeforeNext > 0) {
      this.onRefusal('auth_fail_per_address');
      throw rateLimitedError(res);
    }
  }

  /** Counts a failed authentication for the address; throws 429 once the budget is exceeded. */
  async recordAuthFailure(address: string): Promise<void> {
    await this.consume(this.authFail, 'auth_fail_per_address', address);
  }

  private async consume(limiter: RateLimiterAbstract, name: LimiterName, key: string): Promise<void> {
    try {
      await limiter.consume(key);
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) {
        this.onRefusal(name);
        throw rateLimitedError(rejection);
      }
      // The store itself failed and no insurance answered: do not refuse the request for our fault.
    }
  }
}
