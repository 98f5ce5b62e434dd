// The unit of work, the only way records change: an admin change, the revocation entries it implies and
// its audit event commit together or not at all. Postgres implements it as one transaction bounded by the store write
// deadline (adapters/postgres/unit-of-work.ts); the cached store wraps it so that cache drops go out after
// the commit (adapters/cache/cached-store.ts); test/support/memory/ has an in-memory one.
import type { AuditEvent } from '../audit/events.js';
import type { RevocationEntry, RevocationStoreQueries, RevocationTarget } from './revocation-log.js';
import type { AgentRecord, AgentStatus, GrantRecord, PlatformInput, PlatformRecord } from '../model.js';
import type { SigningKeyWriter } from './store.js';
import type { FeedCredentialWrites } from './feed-credentials.js';
import type { ClientKeyWrites } from './client-keys.js';

/**
 * The admin writes, and the reads a change decides on, inside the transaction: the only way records change.
 * The reads see the transaction's own writes and never a cache.
 */
export interface AdminWrites {
  getPlatform(platformId: string): Promise<PlatformRecord | null>;
  createPlatform(input: PlatformInput): Promise<PlatformRecord>;
  /** Replacing `scopes` also removes the dropped scopes from every grant on the platform. */
  updatePlatform(platformId: string, patch: Partial<PlatformInput>): Promise<PlatformRecord | null>;
  /** api_key_ids of every agent holding a grant on the platform (what a platform change invalidates). */
  apiKeyIdsOnPlatform(platformId: string): Promise<string[]>;

  getAgent(agentId: string): Promise<AgentRecord | null>;
  createAgent(input: { name: string; apiKeyId: string; secretHash: string }): Promise<AgentRecord>;
  updateAgent(agentId: string, patch: { name?: string; status?: AgentStatus }): Promise<AgentRecord | null>;
  /** Sets a new secret hash; the old one stays valid until `previousValidUntil` (null: revoked now). */
  rotateSecret(agentId: string, secretHash: string, previousValidUntil: Date | null): Promise<AgentRecord | null>;

  listGrants(agentId: string): Promise<GrantRecord[]>;
  putGrant(agentId: string, platformId: string, scopes: string[]): Promise<GrantRecord>;
  deleteGrant(agentId: string, platformId: string): Promise<boolean>;
}

/** The revocation log's append (and the query that decides who loses a scope), inside the transaction. */
export interface RevocationAppender extends RevocationStoreQueries {
  /** Appends entries (one per affected platform) expiring at `expiresAt`; returns them with their sequences. */
  append(target: RevocationTarget, expiresAt: Date): Promise<RevocationEntry[]>;
  /**
   * The database's clock (ms since the epoch): revocation cut-offs are taken from it, so one instance's
   * skewed clock cannot move a cut-off before tokens that other instances issue after the change.
   */
  databaseNow(): Promise<number>;
}

/** The ports a unit of work hands to its function. Only these may be used inside it. */
export interface Transaction {
  store: AdminWrites;
  revocationLog: RevocationAppender;
  /** Writes the event in the transaction (not through the batched trail). */
  audit: { insert(event: AuditEvent): Promise<void> };
  /** Signing-key writes; call `lock` first so that instances never race (see KeyManager). */
  keys: SigningKeyWriter;
  /** The revocation feed's credentials (their hashes). */
  feedCredentials: FeedCredentialWrites;
  /** Agents' public keys, trusted workload issuers and their bindings. */
  clientKeys: ClientKeyWrites;
  /**
   * A cluster-wide lock held until commit or rollback (Postgres: pg_advisory_xact_lock, which works
   * through a transaction-mode pooler). Waits at most the store deadline.
   */
  lock(name: string): Promise<void>;
  /**
   * Runs `effect` once the transaction has committed (invalidation messages: cache drops, revocation
   * notices), in the order queued; never when it rolls back. A failed effect does not undo the change nor
   * fail the call: it is reported by the implementation.
   */
  afterCommit(effect: () => Promise<void>): void;
}

export interface UnitOfWork {
  /**
   * Runs `fn` in one transaction and commits all of it, or nothing. A StoreUnavailableError (503 with
   * Retry-After) means nothing was applied, except WriteDeadlineError: COMMIT was sent and not answered,
   * the outcome is unknown. An error thrown by `fn` (e.g. a ServiceError) rolls back and is rethrown.
   */
  run<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
}

/** Runs the effects queued by `afterCommit`, in order; reports each failure and goes on with the next. */
export async function runEffects(effects: (() => Promise<void>)[], onFailure: (error: unknown) => void): Promise<void> {
  for (const effect of effects) {
    try {
      await effect();
    } catch (error) {
      onFailure(error);
    }
  }
}
