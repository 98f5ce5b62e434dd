// Agents, their secrets and their grants (admin operations). A secret is generated here, returned once,
// and stored only as an argon2id hash computed in the worker pool.
import { ServiceError } from '../errors.js';
import type { SecretHasher } from '../ports/crypto.js';
import type { AgentRecord, AgentStatus, GrantRecord } from '../model.js';
import type { Store } from '../ports/store.js';
import { hintedSalt, hintOfHash, secretHint } from '../credentials/secret-hint.js';
import { generateApiKeyId, generateSecret } from '../credentials/generate.js';
import { NO_REVOCATIONS, type Revocations } from '../revocation/revocation-service.js';

export interface AgentServicePorts {
  store: Store;
  hasher: SecretHasher;
  revocations?: Revocations;
  /** The api_key_id prefix (`API_KEY_PREFIX`). */
  apiKeyPrefix: string;
}

export class AgentService {
  private readonly store: Store;
  private readonly hasher: SecretHasher;
  private readonly revocations: Revocations;
  private readonly apiKeyPrefix: string;

  constructor(ports: AgentServicePorts) {
    ({ store: this.store, hasher: this.hasher, apiKeyPrefix: this.apiKeyPrefix } = ports);
    this.revocations = ports.revocations ?? NO_REVOCATIONS;
  }

  /** Takes back the agent's tokens on every platform it holds a grant on (and only those). */
  private async revokeEverywhere(agentId: string): Promise<void> {
    const grants = await this.store.listGrants(agentId);
    await this.revocations.agent(agentId, grants.map((g) => g.platformId));
  }

  async create(name: string): Promise<{ agent: AgentRecord; secret: string }> {
    const secret = generateSecret();
    const secretHash = await this.hasher.hashSecret(secret, hintedSalt(secret));
    const agent = await this.store.createAgent({ name, apiKeyId: generateApiKeyId(this.apiKeyPrefix), secretHash });
    return { agent, secret };
  }

  async get(agentId: string): Promise<AgentRecord> {
    const agent = await this.store.getAgent(agentId.toLowerCase());
    if (!agent) throw new ServiceError('not_found', 'No agent with this id.');
    return agent;
  }

  list(): Promise<AgentRecord[]> {
    return this.store.listAgents();
  }

  async update(agentId: string, patch: { name?: string; status?: AgentStatus }): Promise<AgentRecord> {
    const agent = await this.store.updateAgent(agentId.toLowerCase(), patch);
    if (!agent) throw new ServiceError('not_found', 'No agent with this id.');
    if (patch.status === 'inactive') await this.revokeEverywhere(agent.id);
    return agent;
  }

  /** New secret; the old one keeps working for `graceSeconds` (0: revoked at once). */
  async rotateSecret(agentId: string, graceSeconds: number): Promise<{ apiKeyId: string; secret: string }> {
    const current = await this.get(agentId);
    // The new secret's hint must differ from the current one's, so that during the grace period each
    // presented secret points at one hash (secret-hint.ts).
    const currentHint = hintOfHash((await this.store.getSecretHashes(current.apiKeyId))?.current);
    let secret = generateSecret();
    while (secretHint(secret) === currentHint) secret = generateSecret();
    const secretHash = await this.hasher.hashSecret(secret, hintedSalt(secret));
    const until = graceSeconds > 0 ? new Date(Date.now() + graceSeconds * 1000) : null;
    const agent = await this.store.rotateSecret(agentId.toLowerCase(), secretHash, until);
    if (!agent) throw new ServiceError('not_found', 'No agent with this id.');
    // Without grace the old secret is presumed leaked: tokens it bought are taken back too.
    if (!until) await this.revokeEverywhere(agent.id);
    return { apiKeyId: agent.apiKeyId, secret };
  }

  async putGrant(agentId: string, platformId: string, scopes: string[]): Promise<GrantRecord> {
    const agent = await this.get(agentId);
    const platform = await this.store.getPlatform(platformId.toLowerCase());
    if (!platform) throw new ServiceError('not_found', 'No platform with this id.');
    const defined = new Set(platform.scopes.map((s) => s.name));
    scopes.forEach((scope, i) => {
      if (!defined.has(scope)) throw new ServiceError('validation_error', `scopes[${i}] "${scope}" is not defined on the platform.`);
    });
    const next = [...new Set(scopes)].sort();
    const previous = (await this.store.listGrants(agent.id)).find((g) => g.platformId === platform.id);
    const grant = await this.store.putGrant(agent.id, platform.id, next);
    // Narrowing a grant takes back tokens carrying a scope the agent no longer has.
    if (previous && previous.scopes.some((scope) => !next.includes(scope))) await this.revocations.agent(agent.id, [platform.id]);
    return grant;
  }

  async deleteGrant(agentId: string, platformId: string): Promise<void> {
    const agent = await this.get(agentId);
    const deleted = await this.store.deleteGrant(agent.id, platformId.toLowerCase());
    if (deleted) await this.revocations.agent(agent.id, [platformId.toLowerCase()]);
  }

  async listGrants(agentId: string): Promise<GrantRecord[]> {
    const agent = await this.get(agentId);
    return this.store.listGrants(agent.id);
  }
}
