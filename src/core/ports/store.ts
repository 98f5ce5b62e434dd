// The records' storage port: what the core reads. Every write is made inside a unit of work
// (ports/unit-of-work.ts, `Transaction.store`), never here. Postgres implements it (adapters/postgres); the
// cached store (adapters/cache) wraps any implementation with an in-process cache, Redis and invalidation;
// the memory store (test/support/memory) implements it for the core's in-process tests.
import type { AgentCredentials, AgentRecord, AgentView, GrantRecord, PlatformRecord, SecretHashes, SigningKeyRow } from '../model.js';

export interface Store {
  // Token path.
  /** `alreadyRead`: the credentials just verified; a caching store may answer with their view (see there). */
  getAgentView(apiKeyId: string, alreadyRead?: AgentCredentials): Promise<AgentView | null>;
  getPlatform(platformId: string): Promise<PlatformRecord | null>;
  getSecretHashes(apiKeyId: string): Promise<SecretHashes | null>;
  /** The secret hashes and the view together (the cold path's single read). */
  getAgentCredentials(apiKeyId: string): Promise<AgentCredentials | null>;

  // Admin reads and listings.
  listPlatforms(): Promise<PlatformRecord[]>;
  getAgent(agentId: string): Promise<AgentRecord | null>;
  listAgents(): Promise<AgentRecord[]>;
  listGrants(agentId: string): Promise<GrantRecord[]>;

  // Signing keys (never cached outside the process; see domain/keys).
  listSigningKeys(): Promise<SigningKeyRow[]>;
  /**
   * Runs `fn` while holding a cluster-wide lock named `lock` (a Postgres advisory lock).
   * With `wait: false`, returns undefined at once if another instance holds it.
   */
  withLock<T>(lock: string, wait: boolean, fn: (keys: SigningKeyWriter) => Promise<T>, options?: LockOptions): Promise<T | undefined>;

  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface LockOptions {
  /**
   * Bound the whole transaction by the store deadline (admin key rotate/retire): past it, the
   * transaction is cancelled and rolled back and the call fails with StoreUnavailableError. Without
   * it (start-up, scheduled rotation) the lock is held for as long as `fn` needs.
   */
  bounded?: boolean;
}

/** Signing-key writes, only available inside `withLock` so that instances never race. */
export interface SigningKeyWriter {
  listSigningKeys(): Promise<SigningKeyRow[]>;
  insertSigningKey(row: SigningKeyRow): Promise<void>;
  updateSigningKey(kid: string, changes: { activatesAt?: Date; retiredAt?: Date }): Promise<void>;
}
