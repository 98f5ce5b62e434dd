// The records' storage port. Postgres implements it (adapters/postgres); the cached store (adapters/cache)
// wraps any implementation with an in-process cache, Redis and invalidation; the memory store
// (core/testing) implements it for the core's in-process tests.
import type { AgentCredentials, AgentRecord, AgentStatus, AgentView, GrantRecord, PlatformInput, PlatformRecord, SecretHashes, SigningKeyRow } from '../model.js';

export interface Store {
  // Token path.
  /** `alreadyRead`: the credentials just verified; a caching store may answer with their view (see there). */
  getAgentView(apiKeyId: string, alreadyRead?: AgentCredentials): Promise<AgentView | null>;
  getPlatform(platformId: string): Promise<PlatformRecord | null>;
  getSecretHashes(apiKeyId: string): Promise<SecretHashes | null>;
  /** The secret hashes and the view together (the cold path's single read). */
  getAgentCredentials(apiKeyId: string): Promise<AgentCredentials | null>;

  // Admin: platforms.
  createPlatform(input: PlatformInput): Promise<PlatformRecord>;
  /** Replacing `scopes` also removes the dropped scopes from every grant on the platform. */
  updatePlatform(platformId: string, patch: Partial<PlatformInput>): Promise<PlatformRecord | null>;
  listPlatforms(): Promise<PlatformRecord[]>;
  /** api_key_ids of every agent holding a grant on the platform (what a platform change invalidates). */
  apiKeyIdsOnPlatform(platformId: string): Promise<string[]>;

  // Admin: agents and grants.
  createAgent(input: { name: string; apiKeyId: string; secretHash: string }): Promise<AgentRecord>;
  getAgent(agentId: string): Promise<AgentRecord | null>;
  listAgents(): Promise<AgentRecord[]>;
  updateAgent(agentId: string, patch: { name?: string; status?: AgentStatus }): Promise<AgentRecord | null>;
  /** Sets a new secret hash; the old one stays valid until `previousValidUntil` (null: revoked now). */
  rotateSecret(agentId: string, secretHash: string, previousValidUntil: Date | null): Promise<AgentRecord | null>;
  putGrant(agentId: string, platformId: string, scopes: string[]): Promise<GrantRecord>;
  deleteGrant(agentId: string, platformId: string): Promise<boolean>;
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
