// Secrets verified by any instance, shared between instances and restarts (Redis). An entry is a keyed
// HMAC of (api_key_id, secret, the hash it matched): the key is derived from a secret every instance holds
// and Redis never sees, so whoever holds Redis can neither read a secret out of it nor forge an entry.
// Binding the entry to the hash makes a stale entry harmless: after a rotation the hash it names is gone,
// so it matches nothing, whatever invalidation messages were lost: nothing in it needs dropping on an
// invalidation (a deactivated agent is refused by its status).
export interface SharedVerifiedMemory {
  /**
   * Which of `hashes` (in the order the caller would verify them) `secret` was verified against by some
   * instance, still valid: its index, or -1 (also when the memory cannot answer).
   */
  find(apiKeyId: string, secret: string, hashes: string[]): Promise<number>;
  /** Remembers that `secret` matched `hash`, until `expiresAt` (ms). Best effort. */
  remember(apiKeyId: string, secret: string, hash: string, expiresAt: number): Promise<void>;
}
