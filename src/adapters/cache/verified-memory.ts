// The shared verified-secret memory (core/ports/verified-memory.ts) in Redis: one string key per verified
// (api_key_id, secret, hash), `<prefix>v:{<api_key_id>}:<field>`, where the field is HMAC-SHA256(key,
// api_key_id, secret, argon2 hash) in hex and the value the entry's expiry (ms), which is also the key's own
// expiry (PX). The key is derived from KEY_ENCRYPTION_KEY, which every instance holds and Redis never sees:
// an entry cannot be forged or turned back into a secret by whoever holds Redis, and it names the hash it
// was verified against, so after a rotation it matches nothing. One round trip, one command each way: a
// lookup is one MGET (the hash tag keeps an agent's keys in one Cluster slot), a write one SET (each entry
// expires by itself: no count to bound, no TTL to refresh). Outside the cache's keys (`<prefix>c:`), so the
// sweep after a Redis reset leaves it: nothing in it can be stale in a way that matters. Every Redis failure
// is counted and answered as "not remembered".
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
  onFailure: (operation: 'verified_get' | 'verified_set') => void;
}

export class RedisVerifiedMemory implements SharedVerifiedMemory {
  constructor(private readonly options: RedisVerifiedMemoryOptions) {}

  private key(apiKeyId: string, secret: string, hash: string): string {
    const field = createHmac('sha256', this.options.hmacKey).update(apiKeyId).update('\0').update(secret).update('\0').update(hash).digest('hex');
    return `${this.options.keyPrefix}{${apiKeyId}}:${field}`;
  }

  async find(apiKeyId: string, secret: string, hashes: string[]): Promise<number> {
    if (this.options.ttlMs <= 0 || hashes.length === 0) return -1;
    let values: (string | null)[];
    try {
      values = await this.options.redis.mget(...hashes.map((hash) => this.key(apiKeyId, secret, hash)));
    } catch {
      this.options.onFailure('verified_get');
      return -1;
    }
    const now = Date.now();
    return values.findIndex((value) => value !== null && Number(value) > now);
  }

  async remember(apiKeyId: string, secret: string, hash: string, expiresAt: number): Promise<void> {
    const until = Math.min(expiresAt, Date.now() + this.options.ttlMs);
    const ms = Math.floor(until - Date.now());
    if (!(ms > 0)) return;
    try {
      await this.options.redis.set(this.key(apiKeyId, secret, hash), String(until), 'PX', ms);
    } catch {
      this.options.onFailure('verified_set');
    }
  }
}
