// Remembers secrets that passed argon2id, so the warm path never runs argon2 again. It keeps an HMAC of
// the secret under a random per-process key (never the secret itself, never outside this process),
// bounded in size and time, and forgets an agent at once when an invalidation names it.
//
// Each entry also keeps an HMAC of the hash the secret matched. When invalidations may have been missed
// (a Redis reconnect, a write whose outcome is unknown: an "all"), entries are not dropped: they are
// marked for a re-check, and the next use of each compares it with the agent's hashes as Postgres has
// them now (one read, no argon2). An entry whose hash is gone (a rotation it did not hear of) is dropped.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { BoundedCache } from '../support/bounded-cache.js';

interface Remembered {
  mac: Buffer;
  /** HMAC of the hash the secret matched: what a re-check compares. */
  hashMac: Buffer;
  agentId: string;
  expiresAt: number;
  /** The re-check epoch the entry was last known good in. */
  epoch: number;
}

/** Read before loading hashes; `remember` refuses (or marks for a re-check) what changed since. */
export interface VerifiedStamp {
  generation: number;
  epoch: number;
}

/** At most this many secrets per key (current and, during a rotation grace, previous). */
const PER_KEY = 2;

export interface VerifiedCredentialsOptions {
  /** API keys remembered at most (VERIFIED_CACHE_MAX_ENTRIES); 0 remembers none. */
  maxEntries: number;
  /** How long a secret is remembered after it passed argon2id. */
  ttlMs: number;
}

export class VerifiedCredentials {
  private readonly hmacKey = randomBytes(32);
  /** api_key_id → the secrets remembered for it; the entry lives as long as its longest-lived secret. */
  private readonly entries: BoundedCache<Remembered[]>;
  /** Bumped by `recheckAll`: entries from an earlier epoch are re-checked before use. */
  private epoch = 0;

  private readonly ttlMs: number;

  constructor({ maxEntries, ttlMs }: VerifiedCredentialsOptions) {
    this.ttlMs = ttlMs;
    this.entries = new BoundedCache({ maxEntries, ttlMs });
  }

  /** Read before loading hashes; `remember` refuses if anything was forgotten since. */
  get generation(): VerifiedStamp {
    return { generation: this.entries.generation, epoch: this.epoch };
  }

  private mac(apiKeyId: string, secret: string): Buffer {
    return createHmac('sha256', this.hmacKey).update(apiKeyId).update('\0').update(secret).digest();
  }

  private hashMac(hash: string): Buffer {
    return createHmac('sha256', this.hmacKey).update('hash\0').update(hash).digest();
  }

  private find(apiKeyId: string, secret: string): Remembered | undefined {
    // peek: only remembering moves a key up in the bound, a match does not (as before BoundedCache).
    const list = this.entries.peek(apiKeyId);
    if (!list) return undefined;
    const mac = this.mac(apiKeyId, secret);
    const now = Date.now();
    return list.find((entry) => entry.expiresAt > now && timingSafeEqual(entry.mac, mac));
  }

  /** The agent id if this exact secret was verified for this key, is still remembered and needs no re-check. */
  match(apiKeyId: string, secret: string): string | undefined {
    const entry = this.find(apiKeyId, secret);
    return entry && entry.epoch === this.epoch ? entry.agentId : undefined;
  }

  /** This exact secret is remembered but must be re-checked against the agent's hashes before use. */
  needsRecheck(apiKeyId: string, secret: string): boolean {
    const entry = this.find(apiKeyId, secret);
    return entry !== undefined && entry.epoch !== this.epoch;
  }

  /**
   * Re-checks a remembered secret against the hashes Postgres holds now (`hashes`, in the order the
   * caller would verify them): the index of the hash it was verified against, or -1 (then forgotten).
   */
  recheck(apiKeyId: string, secret: string, hashes: string[], stamp: VerifiedStamp): number {
    const entry = this.find(apiKeyId, secret);
    if (!entry) return -1;
    const index = hashes.findIndex((hash) => timingSafeEqual(entry.hashMac, this.hashMac(hash)));
    if (index < 0) {
      this.forget(apiKeyId);
      return -1;
    }
    // Good as of the read that `stamp` preceded; a re-check epoch begun since then asks again.
    if (stamp.generation === this.entries.generation) entry.epoch = Math.max(entry.epoch, stamp.epoch);
    return index;
  }

  /**
   * Remembers a secret verified against `hash` until `validUntil` (or the TTL, whichever is sooner),
   * unless the agent was invalidated since `stamp` was read: then the verification may have used a
   * revoked hash. A re-check epoch begun since leaves the entry to be re-checked.
   */
  remember(apiKeyId: string, secret: string, agentId: string, stamp: VerifiedStamp, hash: string, validUntil?: number): void {
    const now = Date.now();
    const expiresAt = Math.min(now + this.ttlMs, validUntil ?? Infinity);
    const mac = this.mac(apiKeyId, secret);
    const list = (this.entries.peek(apiKeyId) ?? []).filter((e) => e.expiresAt > now && !timingSafeEqual(e.mac, mac));
    list.push({ mac, hashMac: this.hashMac(hash), agentId, expiresAt, epoch: stamp.epoch });
    while (list.length > PER_KEY) list.shift();
    const lastExpiry = Math.max(...list.map((e) => e.expiresAt));
    this.entries.set(apiKeyId, list, stamp.generation, lastExpiry - now);
  }

  forget(apiKeyId: string): void {
    this.entries.delete(apiKeyId);
  }

  /** Invalidations may have been missed: every entry is re-checked against Postgres before its next use. */
  recheckAll(): void {
    this.epoch++;
  }

  clear(): void {
    this.entries.clear();
  }
}
