// Single use of client assertions (their `jti`): shared by every instance through Redis (SET NX until the
// assertion could no longer be accepted, its exp + the clock tolerance, then Redis forgets it), or kept in this
// process on the embedded default. A Redis that cannot answer refuses the assertion with a 503: accepting
// it unchecked would let a replay through at another instance.
import { createHash } from 'node:crypto';
import { StoreUnavailableError } from '../../core/errors.js';
import type { ReplayGuard } from '../../core/ports/assertions.js';
import type { RedisClient } from './redis.js';

/** The key: a hash of the issuer and jti (bounded length whatever the client sent). */
const digest = (id: string) => createHash('sha256').update(id).digest('base64url');

export interface RedisReplayGuardOptions {
  readonly redis: RedisClient;
  /** Put before each key (the service's prefix and `jti:`). */
  readonly keyPrefix: string;
}

export class RedisReplayGuard implements ReplayGuard {
  private readonly redis: RedisClient;
  private readonly keyPrefix: string;

  constructor({ redis, keyPrefix }: RedisReplayGuardOptions) {
    this.redis = redis;
    this.keyPrefix = keyPrefix;
  }

  async firstUse(id: string, rememberUntilMs: number): Promise<boolean> {
    const ttl = Math.max(1, Math.ceil(rememberUntilMs - Date.now()));
    try {
      return (await this.redis.set(`${this.keyPrefix}${digest(id)}`, '1', 'PX', ttl, 'NX')) === 'OK';
    } catch (error) {
      throw new StoreUnavailableError('redis', error);
    }
  }
}

/** In one process: the map holds each jti until its assertion could no longer be accepted (swept as it is used). */
export class MemoryReplayGuard implements ReplayGuard {
  private readonly seen = new Map<string, number>();
  private sweptAt = 0;

  async firstUse(id: string, rememberUntilMs: number): Promise<boolean> {
    const now = Date.now();
    if (now - this.sweptAt > 10_000) {
      this.sweptAt = now;
      for (const [key, until] of this.seen) if (until <= now) this.seen.delete(key);
    }
    const key = digest(id);
    const until = this.seen.get(key);
    if (until !== undefined && until > now) return false;
    this.seen.set(key, rememberUntilMs);
    return true;
  }
}
