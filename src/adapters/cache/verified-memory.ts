// The shared verified-secret memory (core/ports/verified-memory.ts) in Redis: one hash per api_key_id,
// `<prefix>v:<api_key_id>`, whose fields are HMAC-SHA256(key, api_key_id, secret, argon2 hash) in hex and
// whose values are the entry's expiry (ms). The key is derived from KEY_ENCRYPTION_KEY, which every
// instance holds and Redis never sees: an entry cannot be forged or turned back into a secret by whoever
// holds Redis, and it names the hash it was verified against, so after a rotation it matches nothing.
// Outside the cache's keys (`<prefix>c:`), so the sweep after a Redis reset leaves it: nothing in it can
// be stale in a way that matters. Every Redis failure is counted and answered as "not remembered".
import { createHmac } from 'node:crypto';
import type { RedisClient } from './redis.js';
import type { SharedVerifiedMemory } from '../../core/ports/verified-memory.js';

export interface RedisVerifiedMemoryOptions {
  redis: RedisClient;
  keyPrefix: string;
  /** The HMAC key (derived from the key-encryption key; never sent to Redis). */
  hmacKey: Buffer;
  /** How long an entry lives at most (VERIFIED_CACHE_TTL_SECONDS). */
  ttlMs: number;
  onFailure: (operation: 'verified_get' | 'verified_set' | 'verified_delete') => void;
}

/** Fields per key id beyond which the hash is started afresh (secrets of long-gone rotations). */
const MAX_FIELDS = 8;

export class RedisVerifiedMemory implements SharedVerifiedMemory {
  constructor(private readonly options: RedisVerifiedMemoryOptions) {}

  private key(apiKeyId: string): string {
    return `${this.options.keyPrefix}${apiKeyId}`;
  }

  private field(apiKeyId: string, secret: string, hash: string): string {
    return createHmac('sha256', this.options.hmacKey).update(apiKeyId).update('\0').update(secret).update('\0').update(hash).digest('hex');
  }

  async find(apiKeyId: string, secret: string, hashes: string[]): Promise<number> {
    if (this.options.ttlMs <= 0 || hashes.length === 0) return -1;
    let values: (string | null)[];
    try {
      values = await this.options.redis.hmget(this.key(apiKeyId), ...hashes.map((hash) => this.field(apiKeyId, secret, hash)));
    } catch {
      this.options.onFailure('verified_get');
      return -1;
    }
    const now = Date.now();
    return values.findIndex((value) => value !== null && Number(value) > now);
  }

  async remember(apiKeyId: string, secret: string, hash: string, expiresAt: number): Promise<void> {
    const { redis, ttlMs } = this.options;
    const until = Math.min(expiresAt, Date.now() + ttlMs);
    if (!(until > Date.now())) return;
    const key = this.key(apiKeyId);
    try {
      if ((await redis.hlen(key)) >= MAX_FIELDS) await redis.del(key);
      await redis.hset(key, this.field(apiKeyId, secret, hash), String(until));
      await redis.pexpire(key, ttlMs);
    } catch {
      this.options.onFailure('verified_set');
    }
  }

  async forget(apiKeyIds: string[]): Promise<void> {
    // One key per DEL: a Cluster refuses multi-key commands across slots.
    const results = await Promise.allSettled(apiKeyIds.map((id) => this.options.redis.del(this.key(id))));
    if (results.some((r) => r.status === 'rejected')) this.options.onFailure('verified_delete');
  }
}
