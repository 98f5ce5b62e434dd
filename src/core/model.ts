// Records and the storage interface. Postgres implements it; the cached store wraps any implementation
// with an in-process cache, Redis, and invalidation. Domain code depends only on this file.
import { StoreUnavailableError } from './errors.js';

export type AgentStatus = 'active' | 'inactive';
export type PlatformStatus = 'active' | 'suspended' | 'disabled';
export type VerificationStatus = 'pending' | 'verified' | 'failed';

export interface ScopeDefinition {
  name: string;
  description: string;
}

export interface RouteRule {
  method: string;
  path: string;
  scopes: string[];
}

/** A stored platform: what was given (PlatformInput) plus its id and times. */
export interface PlatformRecord extends PlatformInput {
  id: string;
  createdAt: string;
  updatedAt: string;
}

export interface AgentRecord {
  id: string;
  name: string;
  status: AgentStatus;
  apiKeyId: string;
  createdAt: string;
  updatedAt: string;
}

export interface GrantRecord {
  agentId: string;
  platformId: string;
  scopes: string[];
  updatedAt: string;
}

/**
 * What the token path needs about an agent, in one read: status and every grant with its platform's
 * status. Holds no secret material, so it may be cached in Redis.
 */
export interface AgentView {
  agentId: string;
  apiKeyId: string;
  status: AgentStatus;
  grants: Record<string, { scopes: string[]; platformStatus: PlatformStatus }>;
}

/** Secret hashes of an agent: read from Postgres only, never cached outside the process. */
export interface SecretHashes {
  agentId: string;
  current: string;
  /** The previous secret's hash while its grace period lasts. */
  previous: string | null;
  previousExpiresAt: Date | null;
}

export interface SigningKeyRow {
  kid: string;
  publicJwk: { kty: 'RSA'; n: string; e: string };
  /** AES-256-GCM ciphertext of the PKCS#8 PEM, base64 (iv | tag | data). */
  privateKeyEncrypted: string;
  createdAt: Date;
  activatesAt: Date;
  retiredAt: Date | null;
}

export interface PlatformInput {
  name: string;
  domain: string | null;
  status: PlatformStatus;
  verificationStatus: VerificationStatus;
  scopes: ScopeDefinition[];
  routes: RouteRule[];
}

/**
 * What a cold credential check reads, in one round trip: the hashes to verify and the agent's view to use
 * once they match.
 */
export interface AgentCredentials {
  hashes: SecretHashes;
  view: AgentView;
  /**
   * Set by a caching store when it read these: its invalidation count and the time. `getAgentView` takes
   * this view only while an in-process cache entry read then would still be served (nothing invalidated
   * since, younger than its TTL); otherwise it reads the view again.
   */
  cacheStamp?: { generation: number; at: number };
}

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

/**
 * A write whose outcome is unknown: its COMMIT was sent but no answer came before the store deadline
 * (a stalled or broken connection). Answered as 503 like any store outage, but whoever caches must drop
 * everything it holds, since the write may have been applied. `settled` resolves once the driver learns
 * the outcome (or gives up on the connection): a second invalidation then closes the window.
 */
export class WriteDeadlineError extends StoreUnavailableError {
  constructor(
    store: string,
    readonly settled: Promise<void>,
    cause?: unknown,
  ) {
    super(store, cause);
    this.name = 'WriteDeadlineError';
  }
}
