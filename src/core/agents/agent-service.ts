// Agents, their secrets and their grants (admin operations). A secret is generated here, returned once,
// and stored only as an argon2id hash computed in the worker pool. Every change is one unit of work: the
// write, the revocation entries it implies and its audit event commit together or not at all (a
// revocation is never lost to a crash between them).
import { ServiceError } from '../errors.js';
import type { SecretHasher } from '../ports/crypto.js';
import type { AgentRecord, AgentStatus, GrantRecord } from '../model.js';
import type { Store } from '../ports/store.js';
import type { Transaction, UnitOfWork } from '../ports/unit-of-work.js';
import { auditEvents, type ChangeBy } from '../audit/events.js';
import { hintedSalt, hintOfHash, secretHint } from '../credentials/secret-hint.js';
import { generateApiKeyId, generateSecret } from '../credentials/generate.js';
import { NO_REVOCATIONS, type Revocations } from '../revocation/revocation-service.js';

export interface AgentServicePorts {
  /** Reads outside a change. */
  store: Store;
  /** Every change: the write, its revocation entries and its audit event commit together. */
  uow: UnitOfWork;
  hasher: SecretHasher;
  revocations?: Revocations;
  /** The api_key_id prefix (`API_KEY_PREFIX`). */
  apiKeyPrefix: string;
}

const notFound = () => new ServiceError('not_found', 'No agent with this id.');

export class AgentService {
  private readonly store: Store;
  private readonly uow: UnitOfWork;
  private readonly hasher: SecretHasher;
  private readonly revocations: Revocations;
  private readonly apiKeyPrefix: string;

  constructor(ports: AgentServicePorts) {
    ({ store: this.store, uow: this.uow, hasher: this.hasher, apiKeyPrefix: this.apiKeyPrefix } = ports);
    this.revocations = ports.revocations ?? NO_REVOCATIONS;
  }

  /** Takes back the agent's tokens on every platform it holds a grant on (and only those). */
  private async revokeEverywhere(tx: Transaction, agentId: string): Promise<void> {
    const grants = await tx.store.listGrants(agentId);
    await this.revocations.agent(tx, agentId, grants.map((g) => g.platformId));
  }

  async create(name: string, by: ChangeBy): Promise<{ agent: AgentRecord; secret: string }> {
    const secret = generateSecret();
    // Hashed before the transaction: argon2 must not hold a connection nor eat into the write deadline.
    const secretHash = await this.hasher.hashSecret(secret, hintedSalt(secret));
    const agent = await this.uow.run(async (tx) => {
      const created = await tx.store.createAgent({ name, apiKeyId: generateApiKeyId(this.apiKeyPrefix), secretHash });
      await tx.audit.insert(auditEvents.adminChange('agent.created', { ...by, agentId: created.id, fields: by.fields ?? ['name'], status: created.status }));
      return created;
    });
    return { agent, secret };
  }

  async get(agentId: string): Promise<AgentRecord> {
    const agent = await this.store.getAgent(agentId.toLowerCase());
    if (!agent) throw notFound();
    return agent;
  }

  list(): Promise<AgentRecord[]> {
    return this.store.listAgents();
  }

  async update(agentId: string, patch: { name?: string; status?: AgentStatus }, by: ChangeBy): Promise<AgentRecord> {
    return this.uow.run(async (tx) => {
      const agent = await tx.store.updateAgent(agentId.toLowerCase(), patch);
      if (!agent) throw notFound();
      if (patch.status === 'inactive') await this.revokeEverywhere(tx, agent.id);
      await tx.audit.insert(
        auditEvents.adminChange('agent.updated', {
          ...by,
          agentId: agent.id,
          fields: by.fields ?? Object.keys(patch),
          ...(patch.status ? { status: agent.status } : {}),
        }),
      );
      return agent;
    });
  }

  /** New secret; the old one keeps working for `graceSeconds` (0: revoked at once). */
  async rotateSecret(agentId: string, graceSeconds: number, by: ChangeBy): Promise<{ apiKeyId: string; secret: string }> {
    const current = await this.get(agentId);
    // The new secret's hint must differ from the current one's, so that during the grace period each
    // presented secret points at one hash (secret-hint.ts).
    const currentHint = hintOfHash((await this.store.getSecretHashes(current.apiKeyId))?.current);
    let secret = generateSecret();
    while (secretHint(secret) === currentHint) secret = generateSecret();
    const secretHash = await this.hasher.hashSecret(secret, hintedSalt(secret));
    const until = graceSeconds > 0 ? new Date(Date.now() + graceSeconds * 1000) : null;
    const agent = await this.uow.run(async (tx) => {
      const rotated = await tx.store.rotateSecret(current.id, secretHash, until);
      if (!rotated) throw notFound();
      // Without grace the old secret is presumed leaked: tokens it bought are taken back too.
      if (!until) await this.revokeEverywhere(tx, rotated.id);
      await tx.audit.insert(auditEvents.adminChange('agent.secret_rotated', { ...by, agentId: rotated.id, fields: ['secret'], graceSeconds }));
      return rotated;
    });
    return { apiKeyId: agent.apiKeyId, secret };
  }

  async putGrant(agentId: string, platformId: string, scopes: string[], by: ChangeBy): Promise<GrantRecord> {
    return this.uow.run(async (tx) => {
      // Checked inside the transaction, against the records the grant is written next to.
      const agent = await tx.store.getAgent(agentId.toLowerCase());
      if (!agent) throw notFound();
      const platform = await tx.store.getPlatform(platformId.toLowerCase());
      if (!platform) throw new ServiceError('not_found', 'No platform with this id.');
      const defined = new Set(platform.scopes.map((s) => s.name));
      scopes.forEach((scope, i) => {
        if (!defined.has(scope)) throw new ServiceError('validation_error', `scopes[${i}] "${scope}" is not defined on the platform.`);
      });
      const next = [...new Set(scopes)].sort();
      const previous = (await tx.store.listGrants(agent.id)).find((g) => g.platformId === platform.id);
      const grant = await tx.store.putGrant(agent.id, platform.id, next);
      // Narrowing a grant takes back tokens carrying a scope the agent no longer has.
      if (previous && previous.scopes.some((scope) => !next.includes(scope))) await this.revocations.agent(tx, agent.id, [platform.id]);
      await tx.audit.insert(
        auditEvents.adminChange('grant.put', { ...by, agentId: grant.agentId, platformId: grant.platformId, fields: by.fields ?? ['scopes'], scopes: grant.scopes }),
      );
      return grant;
    });
  }

  async deleteGrant(agentId: string, platformId: string, by: ChangeBy): Promise<void> {
    await this.uow.run(async (tx) => {
      const agent = await tx.store.getAgent(agentId.toLowerCase());
      if (!agent) throw notFound();
      const platform = platformId.toLowerCase();
      const deleted = await tx.store.deleteGrant(agent.id, platform);
      if (deleted) await this.revocations.agent(tx, agent.id, [platform]);
      // Recorded even when there was no grant: the operator asked, and was answered 204.
      await tx.audit.insert(auditEvents.adminChange('grant.deleted', { ...by, agentId: agent.id, platformId: platform }));
    });
  }

  async listGrants(agentId: string): Promise<GrantRecord[]> {
    const agent = await this.get(agentId);
    return this.store.listGrants(agent.id);
  }
}
