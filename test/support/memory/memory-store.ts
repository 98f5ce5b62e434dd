// In-memory implementations of the core's storage ports for in-process tests of the core: a Store, the
// UnitOfWork (all or nothing: each unit works on a copy of the state that replaces it only when the
// function returns), the revocation log's append and the audit events written in a unit of work.
// Minimal on purpose: the lead folds it into the shared in-memory Store (src/core/testing/).
import { randomUUID } from 'node:crypto';
import { StoreUnavailableError } from '../../../src/core/errors.js';
import type { AuditEvent } from '../../../src/core/audit/events.js';
import type { AgentCredentials, AgentRecord, AgentView, GrantRecord, PlatformRecord, SecretHashes, SigningKeyRow } from '../../../src/core/model.js';
import type { RevocationEntry, RevocationTarget } from '../../../src/core/ports/revocation-log.js';
import type { SigningKeyWriter, Store } from '../../../src/core/ports/store.js';
import { runEffects, type AdminWrites, type Transaction, type UnitOfWork } from '../../../src/core/ports/unit-of-work.js';

interface StoredAgent extends AgentRecord {
  secretHash: string;
  previousSecretHash: string | null;
  previousExpiresAt: Date | null;
}

export interface MemoryState {
  agents: Map<string, StoredAgent>;
  platforms: Map<string, PlatformRecord>;
  /** Key: `${agentId} ${platformId}`. */
  grants: Map<string, GrantRecord>;
  keys: SigningKeyRow[];
  heads: Map<string, number>;
  entries: RevocationEntry[];
  events: AuditEvent[];
}

const emptyState = (): MemoryState => ({
  agents: new Map(),
  platforms: new Map(),
  grants: new Map(),
  keys: [],
  heads: new Map(),
  entries: [],
  events: [],
});

const now = () => new Date().toISOString();
const copy = <T>(value: T): T => structuredClone(value);
const publicAgent = ({ secretHash, previousSecretHash, previousExpiresAt, ...agent }: StoredAgent): AgentRecord => copy(agent);

/** Failures a test can inject inside a unit of work (what the Postgres test does with triggers). */
export interface MemoryFaults {
  append?: boolean;
  auditInsert?: boolean;
}

export class MemoryStore implements Store, UnitOfWork {
  state: MemoryState = emptyState();
  readonly faults: MemoryFaults = {};
  /** Effects that threw after a commit. */
  readonly effectFailures: unknown[] = [];
  /** Units of work run one at a time, as if each held every lock (what serialisation the port promises). */
  private queue: Promise<unknown> = Promise.resolve();

  run<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    const turn = this.queue.then(async () => {
      const draft = copy(this.state);
      const effects: (() => Promise<void>)[] = [];
      const result = await fn(this.transaction(draft, effects));
      this.state = draft; // the commit
      await runEffects(effects, (error) => this.effectFailures.push(error));
      return result;
    });
    // The next unit waits for this one, whatever its outcome (a rollback is not a failure of the queue).
    this.queue = turn.then(
      () => undefined,
      () => undefined,
    );
    return turn;
  }

  private transaction(s: MemoryState, effects: (() => Promise<void>)[]): Transaction {
    const faults = this.faults;
    return {
      store: writes(s),
      revocationLog: {
        async append(target, expiresAt) {
          if (faults.append) throw new StoreUnavailableError('memory', new Error('append refused (injected)'));
          return appendTo(s, target, expiresAt);
        },
        async agentsHoldingScopes(platformId, scopes) {
          return [...s.grants.values()].filter((g) => g.platformId === platformId && g.scopes.some((x) => scopes.includes(x))).map((g) => g.agentId);
        },
      },
      audit: {
        async insert(event) {
          if (faults.auditInsert) throw new StoreUnavailableError('memory', new Error('audit insert refused (injected)'));
          s.events.push(copy(event));
        },
      },
      keys: keyWriter(s),
      lock: async () => {}, // units already run one at a time
      afterCommit: (effect) => void effects.push(effect),
    };
  }

  // Reads: the committed state.
  async getAgentView(apiKeyId: string): Promise<AgentView | null> {
    const agent = [...this.state.agents.values()].find((a) => a.apiKeyId === apiKeyId);
    if (!agent) return null;
    const grants: AgentView['grants'] = {};
    for (const g of this.state.grants.values()) {
      if (g.agentId === agent.id) grants[g.platformId] = { scopes: [...g.scopes], platformStatus: this.state.platforms.get(g.platformId)!.status };
    }
    return { agentId: agent.id, apiKeyId: agent.apiKeyId, status: agent.status, grants };
  }

  async getSecretHashes(apiKeyId: string): Promise<SecretHashes | null> {
    const agent = [...this.state.agents.values()].find((a) => a.apiKeyId === apiKeyId);
    if (!agent) return null;
    const open = agent.previousSecretHash !== null && agent.previousExpiresAt !== null && agent.previousExpiresAt.getTime() > Date.now();
    return { agentId: agent.id, current: agent.secretHash, previous: open ? agent.previousSecretHash : null, previousExpiresAt: open ? agent.previousExpiresAt : null };
  }

  async getAgentCredentials(apiKeyId: string): Promise<AgentCredentials | null> {
    const [hashes, view] = [await this.getSecretHashes(apiKeyId), await this.getAgentView(apiKeyId)];
    return hashes && view ? { hashes, view } : null;
  }

  getPlatform = (id: string) => writes(this.state).getPlatform(id);
  getAgent = (id: string) => writes(this.state).getAgent(id);
  listGrants = (id: string) => writes(this.state).listGrants(id);
  apiKeyIdsOnPlatform = (id: string) => writes(this.state).apiKeyIdsOnPlatform(id);
  listPlatforms = async () => [...this.state.platforms.values()].map(copy);
  listAgents = async () => [...this.state.agents.values()].map(publicAgent);
  listSigningKeys = async () => copy(this.state.keys);

  // The Store's own writes: each a unit of work of its own.
  createPlatform: Store['createPlatform'] = (input) => this.run((tx) => tx.store.createPlatform(input));
  updatePlatform: Store['updatePlatform'] = (id, patch) => this.run((tx) => tx.store.updatePlatform(id, patch));
  createAgent: Store['createAgent'] = (input) => this.run((tx) => tx.store.createAgent(input));
  updateAgent: Store['updateAgent'] = (id, patch) => this.run((tx) => tx.store.updateAgent(id, patch));
  rotateSecret: Store['rotateSecret'] = (id, hash, until) => this.run((tx) => tx.store.rotateSecret(id, hash, until));
  putGrant: Store['putGrant'] = (a, p, scopes) => this.run((tx) => tx.store.putGrant(a, p, scopes));
  deleteGrant: Store['deleteGrant'] = (a, p) => this.run((tx) => tx.store.deleteGrant(a, p));

  async withLock<T>(_lock: string, _wait: boolean, fn: (keys: SigningKeyWriter) => Promise<T>): Promise<T | undefined> {
    return this.run((tx) => fn(tx.keys));
  }

  async ping(): Promise<void> {}
  async close(): Promise<void> {}
}

function writes(s: MemoryState): AdminWrites {
  const grantKey = (agentId: string, platformId: string) => `${agentId} ${platformId}`;
  return {
    async getPlatform(id) {
      const platform = s.platforms.get(id);
      return platform ? copy(platform) : null;
    },
    async getAgent(id) {
      const agent = s.agents.get(id);
      return agent ? publicAgent(agent) : null;
    },
    async listGrants(agentId) {
      return [...s.grants.values()].filter((g) => g.agentId === agentId).map(copy);
    },
    async apiKeyIdsOnPlatform(platformId) {
      return [...s.grants.values()].filter((g) => g.platformId === platformId).map((g) => s.agents.get(g.agentId)!.apiKeyId);
    },
    async createPlatform(input) {
      const platform: PlatformRecord = { id: randomUUID(), ...copy(input), createdAt: now(), updatedAt: now() };
      s.platforms.set(platform.id, platform);
      return copy(platform);
    },
    async updatePlatform(id, patch) {
      const current = s.platforms.get(id);
      if (!current) return null;
      const next = { ...current, ...copy(patch), updatedAt: now() };
      s.platforms.set(id, next);
      if (patch.scopes) {
        // Dropped scopes leave every grant on this platform.
        const kept = new Set(patch.scopes.map((x) => x.name));
        for (const g of s.grants.values()) if (g.platformId === id) g.scopes = g.scopes.filter((x) => kept.has(x));
      }
      return copy(next);
    },
    async createAgent(input) {
      const agent: StoredAgent = {
        id: randomUUID(),
        name: input.name,
        status: 'active',
        apiKeyId: input.apiKeyId,
        createdAt: now(),
        updatedAt: now(),
        secretHash: input.secretHash,
        previousSecretHash: null,
        previousExpiresAt: null,
      };
      s.agents.set(agent.id, agent);
      return publicAgent(agent);
    },
    async updateAgent(id, patch) {
      const agent = s.agents.get(id);
      if (!agent) return null;
      if (patch.name !== undefined) agent.name = patch.name;
      if (patch.status !== undefined) agent.status = patch.status;
      agent.updatedAt = now();
      return publicAgent(agent);
    },
    async rotateSecret(id, secretHash, previousValidUntil) {
      const agent = s.agents.get(id);
      if (!agent) return null;
      agent.previousSecretHash = previousValidUntil ? agent.secretHash : null;
      agent.previousExpiresAt = previousValidUntil;
      agent.secretHash = secretHash;
      agent.updatedAt = now();
      return publicAgent(agent);
    },
    async putGrant(agentId, platformId, scopes) {
      const grant: GrantRecord = { agentId, platformId, scopes: [...scopes], updatedAt: now() };
      s.grants.set(grantKey(agentId, platformId), grant);
      return copy(grant);
    },
    async deleteGrant(agentId, platformId) {
      return s.grants.delete(grantKey(agentId, platformId));
    },
  };
}

function appendTo(s: MemoryState, target: RevocationTarget, expiresAt: Date): RevocationEntry[] {
  const platformIds =
    target.kind === 'agent' ? [...new Set(target.platformIds)].sort() : target.kind === 'platform' ? [target.platformId] : [...s.platforms.keys()].sort();
  return platformIds
    .filter((id) => s.platforms.has(id))
    .map((platformId) => {
      const seq = (s.heads.get(platformId) ?? 0) + 1;
      s.heads.set(platformId, seq);
      const entry: RevocationEntry = {
        platformId,
        seq,
        kind: target.kind,
        agentId: target.kind === 'agent' ? target.agentId : null,
        kid: target.kind === 'key' ? target.kid : null,
        iatMax: target.kind === 'key' ? null : target.iatMax,
        createdAt: new Date(),
        expiresAt,
      };
      s.entries.push(entry);
      return copy(entry);
    });
}

function keyWriter(s: MemoryState): SigningKeyWriter {
  return {
    async listSigningKeys() {
      return copy(s.keys);
    },
    async insertSigningKey(row) {
      s.keys.push(copy(row));
    },
    async updateSigningKey(kid, changes) {
      const row = s.keys.find((k) => k.kid === kid);
      if (row) Object.assign(row, copy(changes));
    },
  };
}
