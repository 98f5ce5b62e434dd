// Remembers secrets that passed argon2id, so the warm path never runs argon2 again. It keeps an HMAC of
// the secret under a random per-process key (never the secret itself, never outside this process),
// bounded in size and time, and forgets an agent at once when anything about it changes.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { BoundedCache } from '../support/bounded-cache.js';

interface Remembered {
  mac: Buffer;
  agentId: string;
  expiresAt: number;
}

/** At most this many secrets per key (current and, during a rotation grace, previous). */
const PER_KEY = 2;

export class VerifiedCredentials {
  private readonly hmacKey = randomBytes(32);
  /** api_key_id → the secrets remembered for it; the entry lives as long as its longest-lived secret. */
  private readonly entries: BoundedCache<Remembered[]>;

  constructor(
    maxEntries: number,
    private readonly ttlMs: number,
  ) {
    this.entries = new BoundedCache(maxEntries, ttlMs);
  }

  /** Read before loading hashes; `remember` refuses if anything was forgotten since. */
  get generation(): number {
    return this.entries.generation;
  }

  private mac(apiKeyId: string, secret: string): Buffer {
    return createHmac('sha256', this.hmacKey).update(apiKeyId).update('\0').update(secret).digest();
  }

  /** The agent id if this exact secret was verified for this key and is still remembered. */
  match(apiKeyId: string, secret: string): string | undefined {
    // peek: only remembering moves a key up in the bound, a match does not (as before BoundedCache).
    const list = this.entries.peek(apiKeyId);
    if (!list) return undefined;
    const mac = this.mac(apiKeyId, secret);
    const now = Date.now();
    for (const entry of list) {
      if (entry.expiresAt > now && timingSafeEqual(entry.mac, mac)) return entry.agentId;
    }
    return undefined;
  }

  /**
   * Remembers a verified secret until `validUntil` (or the TTL, whichever is sooner), unless the agent
   * was invalidated since `generation` was read: then the verification may have used a revoked hash.
   */
  remember(apiKeyId: string, secret: string, agentId: string, generation: number, validUntil?: number): void {
    const now = Date.now();
    const expiresAt = Math.min(now + this.ttlMs, validUntil ?? Infinity);
    const list = (this.entries.peek(apiKeyId) ?? []).filter((e) => e.expiresAt > now);
    list.push({ mac: this.mac(apiKeyId, secret), agentId, expiresAt });
    while (list.length > PER_KEY) list.shift();
    const lastExpiry = Math.max(...list.map((e) => e.expiresAt));
    this.entries.set(apiKeyId, list, generation, lastExpiry - now);
  }

  forget(apiKeyId: string): void {
    this.entries.delete(apiKeyId);
  }

  clear(): void {
    this.entries.clear();
  }
}
