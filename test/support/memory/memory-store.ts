// In-memory implementations of the core's ports, so the core's rules run in process in milliseconds (the
// memory adapter of node-oidc-provider, the memory managers of Hydra). They pass the same conformance suites
// as the Postgres adapters (test/integration/store-conformance.test.ts), so a rule that holds here holds against the
// real stores too. As there, records change only in a unit of work (MemoryAdminWrites, through
// MemoryUnitOfWork).
import { createHash, randomUUID } from 'node:crypto';
import type { AgentCredentials, AgentRecord, AgentStatus, AgentView, GrantRecord, PlatformInput, PlatformRecord, SecretHashes, SigningKeyRow } from '../../../src/core/model.js';
import type { LockOptions, SigningKeyWriter, Store } from '../../../src/core/ports/store.js';
import type { AdminWrites } from '../../../src/core/ports/unit-of-work.js';
import type { RevocationEntry, RevocationStore, RevocationTarget } from '../../../src/core/ports/revocation-log.js';
import type { SecretHasher, TokenSigner, TokenType } from '../../../src/core/ports/crypto.js';
import type { AuditEvent, AuditSink } from '../../../src/core/audit/events.js';
import { ServiceError, StoreUnavailableError } from '../../../src/core/errors.js';
import type { FeedCredential, FeedCredentialRecord, FeedCredentialStore, FeedCredentialWrites } from '../../../src/core/ports/feed-credentials.js';
import type { AgentKeys, ClientKeyStore, ClientKeyWrites, KeySource, TrustedIssuer, WorkloadBinding } from '../../../src/core/ports/client-keys.js';

interface StoredAgent extends AgentRecord {
  secretHash: string;
  previousSecretHash: string | null;
  previousExpiresAt: Date | null;
}

const clone = <T>(value: T): T => structuredClone(value);
const now = () => new Date().toISOString();

function agentRecord(agent: StoredAgent): AgentRecord {
  const { id, name, status, apiKeyId, createdAt, updatedAt } = agent;
  return { id, name, status, apiKeyId, createdAt, updatedAt };
}

export class MemoryStore implements Store {
  readonly platforms = new Map<string, PlatformRecord>();
  readonly agents = new Map<string, StoredAgent>();
  /** agentId → platformId → grant */
  readonly grants = new Map<string, Map<string, GrantRecord>>();
  readonly keys = new Map<string, SigningKeyRow>();
  private readonly locks = new Map<string, Promise<void>>();
  /** While set, every call fails as an unreachable store does (503). */
  down = false;

  private check(): void {
    if (this.down) throw new StoreUnavailableError('memory');
  }

  private agentByKey(apiKeyId: string): StoredAgent | undefined {
    for (const agent of this.agents.values()) if (agent.apiKeyId === apiKeyId) return agent;
    return undefined;
  }

  private view(agent: StoredAgent): AgentView {
    const grants: AgentView['grants'] = {};
    for (const [platformId, grant] of this.grants.get(agent.id) ?? []) {
      grants[platformId] = { scopes: [...grant.scopes], platformStatus: this.platforms.get(platformId)!.status };
    }
    return { agentId: agent.id, apiKeyId: agent.apiKeyId, status: agent.status, grants };
  }

  private hashes(agent: StoredAgent): SecretHashes {
    const graced = agent.previousExpiresAt !== null && agent.previousExpiresAt.getTime() > Date.now();
    return {
      agentId: agent.id,
      current: agent.secretHash,
      previous: graced ? agent.previousSecretHash : null,
      previousExpiresAt: graced ? new Date(agent.previousExpiresAt!) : null,
    };
  }

  async getAgentView(apiKeyId: string): Promise<AgentView | null> {
    this.check();
    const agent = this.agentByKey(apiKeyId);
    return agent ? this.view(agent) : null;
  }

  async getPlatform(platformId: string): Promise<PlatformRecord | null> {
    this.check();
    return clone(this.platforms.get(platformId) ?? null);
  }

  async getSecretHashes(apiKeyId: string): Promise<SecretHashes | null> {
    this.check();
    const agent = this.agentByKey(apiKeyId);
    return agent ? this.hashes(agent) : null;
  }

  async getAgentCredentials(apiKeyId: string): Promise<AgentCredentials | null> {
    this.check();
    const agent = this.agentByKey(apiKeyId);
    return agent ? { hashes: this.hashes(agent), view: this.view(agent) } : null;
  }

  async listPlatforms(): Promise<PlatformRecord[]> {
    this.check();
    return clone([...this.platforms.values()]);
  }

  async getAgent(agentId: string): Promise<AgentRecord | null> {
    this.check();
    const agent = this.agents.get(agentId);
    return agent ? agentRecord(agent) : null;
  }

  async listAgents(): Promise<AgentRecord[]> {
    this.check();
    return [...this.agents.values()].map(agentRecord);
  }

  async listGrants(agentId: string): Promise<GrantRecord[]> {
    this.check();
    return clone([...(this.grants.get(agentId)?.values() ?? [])]);
  }

  async listSigningKeys(): Promise<SigningKeyRow[]> {
    this.check();
    return [...this.keys.values()].sort((a, b) => a.activatesAt.getTime() - b.activatesAt.getTime() || a.kid.localeCompare(b.kid)).map(clone);
  }

  async withLock<T>(lock: string, wait: boolean, fn: (keys: SigningKeyWriter) => Promise<T>, _options?: LockOptions): Promise<T | undefined> {
    this.check();
    while (this.locks.has(lock)) {
      if (!wait) return undefined;
      await this.locks.get(lock);
    }
    let release!: () => void;
    this.locks.set(lock, new Promise<void>((r) => (release = r)));
    try {
      return await fn(this.keyWriter());
    } finally {
      this.locks.delete(lock);
      release();
    }
  }

  /** The signing-key writes, for `withLock` and the memory unit of work. */
  keyWriter(): SigningKeyWriter {
    return {
      listSigningKeys: () => this.listSigningKeys(),
      insertSigningKey: async (row) => void this.keys.set(row.kid, clone(row)),
      updateSigningKey: async (kid, changes) => {
        const row = this.keys.get(kid);
        if (row) this.keys.set(kid, { ...row, ...clone(changes) });
      },
    };
  }

  async ping(): Promise<void> {
    this.check();
  }

  async close(): Promise<void> {}
}

/** The admin writes on the memory records, as a unit of work hands them out (MemoryUnitOfWork). */
export class MemoryAdminWrites implements AdminWrites {
  constructor(private readonly store: MemoryStore) {}

  private check(): void {
    if (this.store.down) throw new StoreUnavailableError('memory');
  }

  getPlatform(platformId: string): Promise<PlatformRecord | null> {
    return this.store.getPlatform(platformId);
  }

  getAgent(agentId: string): Promise<AgentRecord | null> {
    return this.store.getAgent(agentId);
  }

  listGrants(agentId: string): Promise<GrantRecord[]> {
    return this.store.listGrants(agentId);
  }

  async createPlatform(input: PlatformInput): Promise<PlatformRecord> {
    this.check();
    const at = now();
    const platform: PlatformRecord = { ...clone(input), id: randomUUID(), createdAt: at, updatedAt: at };
    this.refuseHeldElsewhere(platform);
    this.store.platforms.set(platform.id, platform);
    return clone(platform);
  }

  async updatePlatform(platformId: string, patch: Partial<PlatformInput>): Promise<PlatformRecord | null> {
    this.check();
    const current = this.store.platforms.get(platformId);
    if (!current) return null;
    const updated: PlatformRecord = { ...current, ...clone(patch), updatedAt: now() };
    this.refuseHeldElsewhere(updated);
    this.store.platforms.set(platformId, updated);
    if (patch.scopes) {
      const kept = new Set(patch.scopes.map((s) => s.name));
      for (const byPlatform of this.store.grants.values()) {
        const grant = byPlatform.get(platformId);
        if (grant) grant.scopes = grant.scopes.filter((s) => kept.has(s));
      }
    }
    return clone(updated);
  }

  /** What Postgres' unique indexes refuse (migration 005): another platform's resource or verified domain. */
  private refuseHeldElsewhere(platform: PlatformRecord): void {
    for (const other of this.store.platforms.values()) {
      if (other.id === platform.id) continue;
      if (platform.resources.some((r) => other.resources.includes(r))) {
        throw new ServiceError('conflict', 'A resource identifier in resources is registered to another platform.');
      }
      const verified = (p: PlatformRecord) => (p.verificationStatus === 'verified' && p.domain ? p.domain.toLowerCase() : undefined);
      if (verified(platform) !== undefined && verified(platform) === verified(other)) {
        throw new ServiceError('conflict', 'Another platform is verified for this domain.');
      }
    }
  }

  async apiKeyIdsOnPlatform(platformId: string): Promise<string[]> {
    this.check();
    return [...this.store.grants].filter(([, byPlatform]) => byPlatform.has(platformId)).map(([agentId]) => this.store.agents.get(agentId)!.apiKeyId);
  }

  async createAgent(input: { name: string; apiKeyId: string; secretHash: string }): Promise<AgentRecord> {
    this.check();
    const at = now();
    const agent: StoredAgent = {
      id: randomUUID(),
      name: input.name,
      status: 'active',
      apiKeyId: input.apiKeyId,
      createdAt: at,
      updatedAt: at,
      secretHash: input.secretHash,
      previousSecretHash: null,
      previousExpiresAt: null,
    };
    this.store.agents.set(agent.id, agent);
    return agentRecord(agent);
  }

  async updateAgent(agentId: string, patch: { name?: string; status?: AgentStatus }): Promise<AgentRecord | null> {
    this.check();
    const agent = this.store.agents.get(agentId);
    if (!agent) return null;
    if (patch.name !== undefined) agent.name = patch.name;
    if (patch.status !== undefined) agent.status = patch.status;
    agent.updatedAt = now();
    return agentRecord(agent);
  }

  async rotateSecret(agentId: string, secretHash: string, previousValidUntil: Date | null): Promise<AgentRecord | null> {
    this.check();
    const agent = this.store.agents.get(agentId);
    if (!agent) return null;
    agent.previousSecretHash = previousValidUntil ? agent.secretHash : null;
    agent.previousExpiresAt = previousValidUntil ? new Date(previousValidUntil) : null;
    agent.secretHash = secretHash;
    agent.updatedAt = now();
    return agentRecord(agent);
  }

  async putGrant(agentId: string, platformId: string, scopes: string[]): Promise<GrantRecord> {
    this.check();
    if (!this.store.agents.has(agentId) || !this.store.platforms.has(platformId)) throw new Error('grant of an unknown agent or platform');
    const byPlatform = this.store.grants.get(agentId) ?? new Map<string, GrantRecord>();
    this.store.grants.set(agentId, byPlatform);
    const grant: GrantRecord = { agentId, platformId, scopes: [...scopes], updatedAt: now() };
    byPlatform.set(platformId, grant);
    return clone(grant);
  }

  async deleteGrant(agentId: string, platformId: string): Promise<boolean> {
    this.check();
    return this.store.grants.get(agentId)?.delete(platformId) ?? false;
  }

}

/** The revocation log in memory: one gap-free sequence per platform; a key entry goes to every platform. */
export class MemoryRevocationLog implements RevocationStore {
  readonly entries: RevocationEntry[] = [];
  /** Head sequence per platform (the memory unit of work restores it on rollback). */
  readonly seqs = new Map<string, number>();

  constructor(private readonly store: MemoryStore) {}

  /** The unit of work's append (MemoryUnitOfWork restores the log when the unit rolls back). */
  async append(target: RevocationTarget, expiresAt: Date): Promise<RevocationEntry[]> {
    const platformIds =
      target.kind === 'agent' ? [...new Set(target.platformIds)].sort() : target.kind === 'platform' ? [target.platformId] : [...this.store.platforms.keys()].sort();
    const appended = platformIds
      .filter((id) => this.store.platforms.has(id))
      .map((platformId): RevocationEntry => {
        const seq = (this.seqs.get(platformId) ?? 0) + 1;
        this.seqs.set(platformId, seq);
        return {
          platformId,
          seq,
          kind: target.kind,
          agentId: target.kind === 'agent' ? target.agentId : null,
          kid: target.kind === 'key' ? target.kid : null,
          iatMax: target.kind === 'key' ? null : target.iatMax,
          createdAt: new Date(),
          expiresAt,
        };
      });
    this.entries.push(...appended);
    return appended.map(clone);
  }

  async since(platformId: string, since: number, at: Date): Promise<{ head: number; entries: RevocationEntry[] }> {
    const entries = this.entries.filter((e) => e.platformId === platformId && e.seq > since && e.expiresAt > at).sort((a, b) => a.seq - b.seq);
    return { head: this.seqs.get(platformId) ?? 0, entries: entries.map(clone) };
  }

  async heads(platformIds: string[]): Promise<Map<string, number>> {
    return new Map(platformIds.map((id) => [id, this.seqs.get(id) ?? 0]));
  }

  async purgeExpired(at: Date): Promise<number> {
    const live = this.entries.filter((e) => e.expiresAt > at);
    this.entries.splice(0, this.entries.length, ...live);
    return live.length;
  }

  async platformExists(platformId: string): Promise<boolean> {
    return this.store.platforms.has(platformId);
  }

  async agentsHoldingScopes(platformId: string, scopes: string[]): Promise<string[]> {
    return [...this.store.grants]
      .filter(([, byPlatform]) => byPlatform.get(platformId)?.scopes.some((s) => scopes.includes(s)))
      .map(([agentId]) => agentId);
  }
}

/**
 * A secret hasher without argon2: the "hash" is SHA-256 over salt and secret, in a PHC-like string that keeps
 * the salt (so the secret-hint rules, which read the salt, work as with argon2). Counts verifications.
 */
export class MemoryHasher implements SecretHasher {
  verifications = 0;
  /** While set, refuseIfVerificationsFull throws this error (a full argon2 line). */
  full: Error | undefined;

  async hashSecret(secret: string, salt: Uint8Array): Promise<string> {
    const b64 = Buffer.from(salt).toString('base64').replace(/=+$/, '');
    return `$argon2id$v=19$m=19456,t=2,p=1$${b64}$${digest(Buffer.from(salt), secret)}`;
  }

  async verifySecret(task: { hashes: string[]; secret: string }): Promise<number> {
    this.verifications += 1;
    return task.hashes.findIndex((hash) => {
      const parts = hash.split('$');
      if (parts.length < 6) return false;
      return digest(Buffer.from(parts[4]!, 'base64'), task.secret) === parts[5];
    });
  }

  refuseIfVerificationsFull(): void {
    if (this.full) throw this.full;
  }
}

function digest(salt: Buffer, secret: string): string {
  return createHash('sha256').update(salt).update(secret).digest('base64url');
}

/** Signs nothing: the "token" is the payload under a fixed header, with the kid in place of a signature. */
export class MemorySigner implements TokenSigner {
  readonly signed: { kid: string; payload: Record<string, unknown>; typ: TokenType }[] = [];

  async signToken(kid: string, _privateKeyPem: string, payload: string, _signal?: AbortSignal, typ: TokenType = 'JWT'): Promise<string> {
    this.signed.push({ kid, payload: JSON.parse(payload) as Record<string, unknown>, typ });
    const header = Buffer.from(JSON.stringify({ alg: 'none-memory', typ, kid })).toString('base64url');
    return `${header}.${Buffer.from(payload).toString('base64url')}.${kid}`;
  }
}

/** Keeps every event; `failRecords` makes `record` reject (an audit trail that cannot make events durable). */
export class MemoryAuditSink implements AuditSink {
  readonly events: AuditEvent[] = [];
  failRecords = false;

  async record(event: AuditEvent): Promise<void> {
    if (this.failRecords) throw new StoreUnavailableError('audit');
    this.events.push(event);
  }

  emit(event: AuditEvent): void {
    this.events.push(event);
  }
}

/** The feed credentials in memory (their hashes; ids and creation times as Postgres keeps them). */
export class MemoryFeedCredentials implements FeedCredentialStore, FeedCredentialWrites {
  readonly rows = new Map<string, FeedCredentialRecord>();

  constructor(private readonly store: MemoryStore) {}

  private check(): void {
    if (this.store.down) throw new StoreUnavailableError('memory');
  }

  async insertFeedCredential(row: FeedCredentialRecord): Promise<void> {
    this.check();
    if (!this.store.platforms.has(row.platformId)) throw new Error('foreign key: no such platform');
    if ([...this.rows.values()].some((r) => r.tokenHash === row.tokenHash)) throw new Error('unique: token_hash');
    this.rows.set(row.id, clone(row));
  }

  async deleteFeedCredential(platformId: string, id: string): Promise<boolean> {
    this.check();
    const row = this.rows.get(id);
    if (!row || row.platformId !== platformId) return false;
    return this.rows.delete(id);
  }

  async listFeedCredentials(platformId: string): Promise<FeedCredential[]> {
    this.check();
    return (await this.feedCredentialsOf(platformId))
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.id.localeCompare(b.id))
      .map(({ id, platformId: p, createdAt }) => ({ id, platformId: p, createdAt }));
  }

  async allFeedCredentials(): Promise<FeedCredentialRecord[]> {
    this.check();
    return [...this.rows.values()].map(clone);
  }

  async feedCredentialsOf(platformId: string): Promise<FeedCredentialRecord[]> {
    this.check();
    return [...this.rows.values()].filter((r) => r.platformId === platformId).map(clone);
  }
}

/** Agents' public keys, trusted workload issuers and bindings in memory (as the Postgres tables keep them). */
export class MemoryClientKeys implements ClientKeyStore, ClientKeyWrites {
  readonly agentKeys = new Map<string, { source: KeySource; updatedAt: Date }>();
  readonly issuers = new Map<string, TrustedIssuer>();
  readonly bindings = new Map<string, WorkloadBinding>();

  constructor(private readonly store: MemoryStore) {}

  private check(): void {
    if (this.store.down) throw new StoreUnavailableError('memory');
  }

  private apiKeyIdOf(agentId: string): string | undefined {
    return this.store.agents.get(agentId)?.apiKeyId;
  }

  async putAgentKeys(agentId: string, source: KeySource): Promise<void> {
    this.check();
    if (!this.store.agents.has(agentId)) throw new Error('foreign key: no such agent');
    this.agentKeys.set(agentId, { source: clone(source), updatedAt: new Date() });
  }

  async agentKeysOf(agentId: string): Promise<KeySource | null> {
    this.check();
    const row = this.agentKeys.get(agentId);
    return row ? clone(row.source) : null;
  }

  async insertTrustedIssuer(row: TrustedIssuer): Promise<void> {
    this.check();
    if ([...this.issuers.values()].some((i) => i.issuer === row.issuer)) throw new Error('unique: issuer');
    this.issuers.set(row.id, clone(row));
  }

  async deleteTrustedIssuer(id: string): Promise<boolean> {
    this.check();
    for (const [key, b] of this.bindings) if (b.issuerId === id) this.bindings.delete(key);
    return this.issuers.delete(id);
  }

  async getTrustedIssuer(id: string): Promise<TrustedIssuer | null> {
    this.check();
    const row = this.issuers.get(id);
    return row ? clone(row) : null;
  }

  async trustedIssuerNamed(issuer: string): Promise<TrustedIssuer | null> {
    this.check();
    const row = [...this.issuers.values()].find((i) => i.issuer === issuer);
    return row ? clone(row) : null;
  }

  async insertBinding(row: WorkloadBinding): Promise<boolean> {
    this.check();
    const key = `${row.issuerId}\n${row.subject}`;
    if (this.bindings.has(key)) return false;
    this.bindings.set(key, { issuerId: row.issuerId, subject: row.subject, agentId: row.agentId, createdAt: row.createdAt });
    return true;
  }

  async deleteBinding(issuerId: string, subject: string): Promise<string | null> {
    this.check();
    const key = `${issuerId}\n${subject}`;
    const row = this.bindings.get(key);
    if (!row) return null;
    this.bindings.delete(key);
    return row.agentId;
  }

  async allAgentKeys(): Promise<AgentKeys[]> {
    this.check();
    const all = await Promise.all(
      [...this.agentKeys].map(async ([agentId, row]) => {
        const apiKeyId = this.apiKeyIdOf(agentId);
        const view = apiKeyId && (await this.store.getAgentView(apiKeyId));
        return view ? [{ agentId, apiKeyId: view.apiKeyId, source: clone(row.source), updatedAt: row.updatedAt, view }] : [];
      }),
    );
    return all.flat();
  }

  async agentKeysByApiKeyIds(apiKeyIds: string[]): Promise<AgentKeys[]> {
    return (await this.allAgentKeys()).filter((a) => apiKeyIds.includes(a.apiKeyId));
  }

  async listTrustedIssuers(): Promise<TrustedIssuer[]> {
    this.check();
    return [...this.issuers.values()].map(clone);
  }

  async listBindings(issuerId?: string): Promise<WorkloadBinding[]> {
    this.check();
    return [...this.bindings.values()]
      .filter((b) => issuerId === undefined || b.issuerId === issuerId)
      .flatMap((b) => {
        const apiKeyId = this.apiKeyIdOf(b.agentId);
        return apiKeyId ? [{ ...b, apiKeyId }] : [];
      });
  }
}
