// Rate limits (rate-limiter-flexible): per api_key_id on authenticated token requests, and per client
// address on failed authentications. With Redis the counts are shared by every instance; when Redis is
// away an in-process insurance limiter takes over, so limiting never stops and never blocks on Redis.
import type { RedisClient } from '../cache/index.js';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { ServiceError } from '../../core/errors.js';
import type { AuthAttempt } from '../../core/ports/limits.js';
import { LeasedPoints, leaseSize, type Lease } from './leases.js';

export interface LimitersOptions {
  redis: RedisClient | undefined;
  keyPrefix: string;
  tokenPoints: number;
  tokenWindowSeconds: number;
  authFailPoints: number;
  authFailWindowSeconds: number;
  /** Token points leased from Redis at once per key, at most (RATE_LIMIT_TOKEN_LEASE; a quarter of the budget at most). */
  tokenLease?: number;
  /** A Redis command whose failure refuses nothing (a refund that did not reach the store): counted, not thrown. */
  onStoreFailure?: (operation: 'rate_limit_refund') => void;
  /** A request refused by a limit: counted by limiter. */
  onRefusal: (limiter: LimiterName) => void;
}

export type LimiterName = 'token_per_key' | 'auth_fail_per_address' | 'auth_pending_per_address' | 'argon2_share_per_address';

/**
 * The library joins keyPrefix and key with ':' itself. With Redis the key is hash-tagged ("{key}"): in a
 * Cluster everything the library keeps for one key (its MULTI and Lua script touch only that key today)
 * stays in one slot.
 * While Redis is away (or a Cluster master's slots are failing over) the in-process insurance limiter
 * answers with the same budget, per process: limits are shared only while Redis answers.
 */
export function makeLimiter(redis: RedisClient | undefined, keyPrefix: string, points: number, duration: number): RateLimiterAbstract {
  const memory = new RateLimiterMemory({ keyPrefix, points, duration });
  if (!redis) return memory;
  return new HashTaggedRateLimiterRedis({
    storeClient: redis,
    keyPrefix,
    points,
    duration,
    rejectIfRedisNotReady: true,
    insuranceLimiter: memory,
    customIncrTtlLuaScript: INCR_TTL_SCRIPT,
  });
}

/**
 * The library's count-and-window script, leaner for a new window: it ran SET NX (of 0) + INCRBY + PTTL every
 * time; this starts a window with one SET NX of the points themselves (a new key: its TTL is the window),
 * else counts and reads the TTL (INCRBY + PTTL). Same arguments and answer as the library's. ioredis
 * defines it under one name per client ("rlflxIncr"), so every limiter on the client uses this one.
 */
const INCR_TTL_SCRIPT = `if redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[2], 'NX') then \
  return {tonumber(ARGV[1]), 1000 * ARGV[2]} \
end \
local consumed = redis.call('incrby', KEYS[1], ARGV[1]) \
local ttl = redis.call('pttl', KEYS[1]) \
if ttl == -1 then \
  redis.call('expire', KEYS[1], ARGV[2]) \
  ttl = 1000 * ARGV[2] \
end \
return {consumed, ttl} \
`;

/** RATE_LIMIT_TOKEN_LEASE's default. */
export const DEFAULT_TOKEN_LEASE = 32;
/** Checks one address's failure budget lends an instance at once (at most a fifth of the budget). */
const AUTH_ATTEMPT_LEASE = 4;

/** RateLimiterRedis with every key wrapped in a Cluster hash tag. */
class HashTaggedRateLimiterRedis extends RateLimiterRedis {
  override getKey(key: string | number): string {
    return super.getKey(`{${key}}`);
  }
}

export function rateLimitedError(res: RateLimiterRes): ServiceError {
  const retryAfter = Math.max(1, Math.ceil(res.msBeforeNext / 1000));
  return new ServiceError('rate_limited', undefined, retryAfter);
}

/** Addresses remembered as locked out, per process (a flood of addresses cannot grow it further). */
const MAX_LOCKED_OUT = 100_000;
/**
 * Retry-After of a reservation refused while the address's points are held by checks still in flight
 * (not failures): they end within an argon2 verification or so.
 */
export const PENDING_RETRY_AFTER_SECONDS = 1;

export class Limiters {
  private readonly token: RateLimiterAbstract;
  /** With Redis and a budget worth it: the token limit's points, leased per key (leases.ts); else every point in Redis. */
  private readonly tokenLeases: LeasedPoints | undefined;
  /** The same for the reservations of the failure budget (a refund goes back to the lease, not to Redis). */
  private readonly attemptLeases: LeasedPoints | undefined;
  /**
   * Reservations: one point per credential check before it runs, given back unless the credentials were
   * wrong. It bounds the checks one address causes (in flight plus failed) to its budget.
   */
  private readonly authFail: RateLimiterAbstract;
  /**
   * Failed authentications only, same budget and window. Spent, it locks the address out; a refused
   * reservation is a lockout only when this one is spent too (else the points are checks in flight).
   */
  private readonly failures: RateLimiterAbstract;
  /**
   * Addresses whose failure budget is spent → when their window ends (ms). Fed by this process's own
   * failures and refusals, read in memory before the warm path: a locked-out address gets 429 for every
   * credential request until its window passes, a remembered secret included, without a Redis round trip
   * on the warm path (docs/decisions.md, Lockout).
   */
  private readonly lockedOut = new Map<string, number>();
  private readonly authFailPoints: number;

  private readonly onStoreFailure: (operation: 'rate_limit_refund') => void;
  private readonly onRefusal: (limiter: LimiterName) => void;

  constructor(options: LimitersOptions) {
    this.onStoreFailure = options.onStoreFailure ?? (() => undefined);
    this.onRefusal = options.onRefusal;
    this.authFailPoints = options.authFailPoints;
    this.token = makeLimiter(options.redis, `${options.keyPrefix}rl:token`, options.tokenPoints, options.tokenWindowSeconds);
    this.authFail = makeLimiter(options.redis, `${options.keyPrefix}rl:authfail`, options.authFailPoints, options.authFailWindowSeconds);
    this.failures = makeLimiter(options.redis, `${options.keyPrefix}rl:authfailed`, options.authFailPoints, options.authFailWindowSeconds);
    const tokenLease = options.redis ? leaseSize(options.tokenPoints, options.tokenLease ?? DEFAULT_TOKEN_LEASE) : 1;
    if (tokenLease > 1) this.tokenLeases = new LeasedPoints({ limiter: this.token, points: options.tokenPoints, size: tokenLease, rememberRefusals: true });
    const attemptLease = options.redis ? leaseSize(options.authFailPoints, AUTH_ATTEMPT_LEASE, 5) : 1;
    if (attemptLease > 1) this.attemptLeases = new LeasedPoints({ limiter: this.authFail, points: options.authFailPoints, size: attemptLease, rememberRefusals: false });
  }

  /**
   * Counts one token request for an authenticated key; throws 429 past the limit. From the key's lease
   * when it holds a point: synchronous, no Redis (undefined); else a promise (a new lease, or Redis itself).
   */
  consumeToken(apiKeyId: string): Promise<void> | undefined {
    const leases = this.tokenLeases;
    if (!leases) return this.consume(this.token, 'token_per_key', apiKeyId);
    try {
      if (leases.takeLocal(apiKeyId)) return undefined;
    } catch (rejection) {
      this.onRefusal('token_per_key');
      throw rateLimitedError(rejection as RateLimiterRes);
    }
    return this.takeLeased(leases, apiKeyId).then(() => undefined);
  }

  private async takeLeased(leases: LeasedPoints, key: string): Promise<Lease | undefined> {
    try {
      return await leases.take(key);
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) {
        this.onRefusal('token_per_key');
        throw rateLimitedError(rejection);
      }
      return undefined; // the store itself failed and no insurance answered: do not refuse for our fault
    }
  }

  /**
   * Reserves one point of the address's failed-authentication budget before any argon2 work, so that one
   * address never causes more verifications than its budget, however many requests it has in flight.
   * Throws 429: for the rest of the window when failures spent the budget (a lockout), or with a short
   * Retry-After when checks still in flight hold the points (a fleet behind one address, correct
   * secrets). The attempt is refunded when it succeeded or failed for our own reasons (store or pool
   * unavailable), and `fail`ed when the credentials were wrong.
   */
  async reserveAuthAttempt(address: string): Promise<AuthAttempt> {
    const leases = this.attemptLeases;
    let lease: Lease | undefined;
    try {
      if (leases) lease = await leases.take(address);
      else await this.authFail.consume(address);
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) throw await this.refused(address);
      // The store itself failed and no insurance answered: do not refuse for our fault.
      return { refund: () => undefined, fail: async () => undefined };
    }
    let settled = false;
    return {
      refund: () => {
        if (settled) return;
        settled = true;
        // Leased: the point goes back to the lease, for this instance's next check (no Redis).
        if (leases && lease) return leases.giveBack(address, lease);
        // A lost refund only shrinks the address's budget (it errs towards refusing): counted, nothing to undo.
        void this.authFail.reward(address, 1).catch(() => this.onStoreFailure('rate_limit_refund'));
      },
      fail: async () => {
        if (settled) return;
        settled = true;
        await this.recordFailure(address); // the reserved point stays spent
      },
    };
  }

  /** A failure that reserved nothing first (a signature check is cheap): spends a point; throws 429 as above. */
  async recordAuthFailure(address: string): Promise<void> {
    await (await this.reserveAuthAttempt(address)).fail();
  }

  /** Throws 429 while this process knows the address's failure budget to be spent; no I/O. */
  assertNotLockedOut(address: string): void {
    const until = this.lockedOut.get(address);
    if (until === undefined) return;
    const left = until - Date.now();
    if (left <= 0) {
      this.lockedOut.delete(address);
      return;
    }
    this.onRefusal('auth_fail_per_address');
    throw new ServiceError('rate_limited', undefined, Math.max(1, Math.ceil(left / 1000)));
  }

  /** The 429 of a refused reservation: a lockout when failures spent the budget, else a short wait. */
  private async refused(address: string): Promise<ServiceError> {
    let failed: RateLimiterRes | null = null;
    try {
      failed = await this.failures.get(address);
    } catch {
      // The store failed and no insurance answered: not known to be failures, so the short answer (it
      // still refuses this request; the next reservation asks again).
    }
    if (failed && failed.consumedPoints >= this.authFailPoints && failed.msBeforeNext > 0) {
      this.lockOut(address, failed.msBeforeNext);
      this.onRefusal('auth_fail_per_address');
      return rateLimitedError(failed);
    }
    this.onRefusal('auth_pending_per_address');
    return new ServiceError('rate_limited', undefined, PENDING_RETRY_AFTER_SECONDS);
  }

  /** Wrong credentials: one failure; the one that spends the budget locks the address out. */
  private async recordFailure(address: string): Promise<void> {
    try {
      const res = await this.failures.consume(address);
      if (res.remainingPoints <= 0) this.lockOut(address, res.msBeforeNext);
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) this.lockOut(address, rejection.msBeforeNext);
      // Else the store failed and no insurance answered: the reserved point still bounds the address's
      // checks; its next refused reservation finds no failures and answers short, not a lockout.
    }
  }

  private lockOut(address: string, ms: number): void {
    if (ms <= 0) return;
    if (this.lockedOut.size >= MAX_LOCKED_OUT && !this.lockedOut.has(address)) {
      const now = Date.now();
      for (const [key, until] of this.lockedOut) if (until <= now) this.lockedOut.delete(key);
      // Still full: forget the oldest entry (its address still meets the shared limiter on its next cold check).
      if (this.lockedOut.size >= MAX_LOCKED_OUT) this.lockedOut.delete(this.lockedOut.keys().next().value!);
    }
    this.lockedOut.delete(address); // re-inserted last: the Map's order stays oldest first
    this.lockedOut.set(address, Date.now() + ms);
  }

  private async consume(limiter: RateLimiterAbstract, name: LimiterName, key: string): Promise<undefined> {
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
