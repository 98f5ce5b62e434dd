// Agents without secrets, the admin side: agents registered with RFC 7591 client metadata
// (`token_endpoint_auth_method: private_key_jwt` with `jwks` or `jwks_uri`), their keys added and removed
// (several live at once, for rotation), the workload identity issuers the operator trusts and the
// (issuer, subject) pairs bound to agents. Every change is one unit of work with its audit event; taking a
// key or a binding away takes back the tokens it bought (like a secret rotated without grace), through the
// revocation log in the same transaction.
import { randomBytes, randomUUID } from 'node:crypto';
import { ServiceError } from '../errors.js';
import type { AgentRecord } from '../model.js';
import type { AssertionVerifier } from '../ports/assertions.js';
import type { KeySource, PublicJwk, TrustedIssuer, WorkloadBinding, ClientKeyStore } from '../ports/client-keys.js';
import type { SecretHasher } from '../ports/crypto.js';
import type { InvalidationBus } from '../ports/invalidation.js';
import { CAPABILITY_CLIENT_KEYS, type ClusterVersions } from '../ports/cluster-versions.js';
import type { Transaction, UnitOfWork } from '../ports/unit-of-work.js';
import { auditEvents, type ChangeBy } from '../audit/events.js';
import { generateApiKeyId } from '../credentials/generate.js';
import { hintedSalt } from '../credentials/secret-hint.js';
import { NO_REVOCATIONS, type Revocations } from '../revocation/revocation-service.js';
import { jwtVerificationKeys } from './spiffe-bundle.js';

/** Live keys per agent: enough for a rotation with overlap, and it bounds what one check may try. */
export const MAX_KEYS_PER_AGENT = 10;

export interface ClientKeyServicePorts {
  uow: UnitOfWork;
  store: ClientKeyStore;
  verifier: AssertionVerifier;
  /** Hashes the unusable secret a key agent's row carries (the contract's secret endpoint must refuse it). */
  hasher: SecretHasher;
  bus: InvalidationBus;
  revocations?: Revocations;
  apiKeyPrefix: string;
  /** Which live instances can read these records; absent: one instance or one release (embedded, tests). */
  cluster?: ClusterVersions;
}

const notFound = (what = 'agent') => new ServiceError('not_found', `No ${what} with this id.`);
const invalid = (detail: string) => new ServiceError('validation_error', detail);

export class ClientKeyService {
  private readonly revocations: Revocations;
  /** The hash of a random secret nobody ever saw, made once per process: key agents' rows share it. */
  private unusableHash: Promise<string> | undefined;

  constructor(private readonly ports: ClientKeyServicePorts) {
    this.revocations = ports.revocations ?? NO_REVOCATIONS;
  }

  /** A new agent that authenticates with private_key_jwt: no secret is made, shown or usable. */
  async createKeyAgent(name: string, source: KeySource, by: ChangeBy): Promise<AgentRecord> {
    await this.everyInstanceReads();
    // No keys at all is allowed here: such an agent authenticates only through a workload binding.
    await this.checkSource(source, { allowEmpty: true });
    // The row needs a hash: one of a random secret nobody ever sees, so the secret door refuses it like
    // any wrong secret (same cost, same answer). One per process: registering a key agent costs no argon2.
    const secretHash = await (this.unusableHash ??= this.hashOfNothing());
    return this.ports.uow.run(async (tx) => {
      const agent = await tx.store.createAgent({ name, apiKeyId: generateApiKeyId(this.ports.apiKeyPrefix), secretHash });
      await tx.clientKeys.putAgentKeys(agent.id, source);
      await tx.audit.insert(auditEvents.adminChange('agent.created', { ...by, agentId: agent.id, fields: by.fields ?? ['name', source.keys ? 'jwks' : 'jwks_uri'], status: agent.status }));
      this.told(tx, agent.apiKeyId);
      return agent;
    });
  }

  /**
   * Records of agents without secrets are written only once no older instance is live: an old pod cannot
   * read them and would answer 401 invalid_client (which clients do not retry) for an agent that exists.
   */
  private async everyInstanceReads(): Promise<void> {
    if (!this.ports.cluster) return;
    const older = await this.ports.cluster.olderThan(CAPABILITY_CLIENT_KEYS);
    if (older > 0) {
      throw new ServiceError(
        'conflict',
        `Instances of an older release are still connected to the database (${older} connection(s)) and cannot read agents without secrets (client keys, workload identity): finish the rollout so every instance runs this release, then try again.`,
      );
    }
  }

  private hashOfNothing(): Promise<string> {
    const unusable = randomBytes(32).toString('base64url');
    return this.ports.hasher.hashSecret(unusable, hintedSalt(unusable)).catch((error: unknown) => {
      this.unusableHash = undefined; // a pool that was busy: the next registration tries again
      throw error;
    });
  }

  /** The agent's key source, or null when it authenticates with a secret. */
  async keysOf(agentId: string): Promise<KeySource | null> {
    return this.ports.uow.run(async (tx) => {
      const agent = await tx.store.getAgent(agentId.toLowerCase());
      if (!agent) throw notFound();
      return tx.clientKeys.agentKeysOf(agent.id);
    });
  }

  async addKey(agentId: string, jwk: Record<string, unknown>, by: ChangeBy): Promise<KeySource> {
    await this.everyInstanceReads();
    const problem = await this.ports.verifier.checkPublicKey(jwk);
    if (problem) throw invalid(`jwk: ${problem}`);
    const key = jwk as PublicJwk;
    return this.ports.uow.run(async (tx) => {
      const { agent, source } = await this.keyAgent(tx, agentId);
      if (!source.keys) throw new ServiceError('conflict', 'This agent reads its keys from its jwks_uri: change the keys there.');
      if (source.keys.some((k) => k.kid === key.kid)) throw new ServiceError('conflict', `The agent already has a key with kid "${key.kid}".`);
      if (source.keys.length >= MAX_KEYS_PER_AGENT) throw new ServiceError('conflict', `An agent has at most ${MAX_KEYS_PER_AGENT} keys: remove one first.`);
      const next: KeySource = { keys: [...source.keys, key] };
      await tx.clientKeys.putAgentKeys(agent.id, next);
      await tx.audit.insert(auditEvents.adminChange('agent.key_added', { ...by, agentId: agent.id, clientKid: key.kid }));
      this.told(tx, agent.apiKeyId);
      return next;
    });
  }

  /** Removes a key and takes back every token the agent holds (it may have been bought with that key). */
  async removeKey(agentId: string, kid: string, by: ChangeBy): Promise<void> {
    await this.ports.uow.run(async (tx) => {
      const { agent, source } = await this.keyAgent(tx, agentId);
      if (!source.keys?.some((k) => k.kid === kid)) throw notFound('key');
      await tx.clientKeys.putAgentKeys(agent.id, { keys: source.keys.filter((k) => k.kid !== kid) });
      await this.revokeEverywhere(tx, agent.id);
      await tx.audit.insert(auditEvents.adminChange('agent.key_removed', { ...by, agentId: agent.id, clientKid: kid }));
      this.told(tx, agent.apiKeyId);
    });
  }

  async createIssuer(input: { issuer: string; audience: string; source: KeySource }, by: ChangeBy): Promise<TrustedIssuer> {
    await this.everyInstanceReads();
    // A SPIFFE bundle as SPIRE publishes it: its JWT-SVID keys, kid kept (spiffe-bundle.ts).
    if (input.source.keys) input = { ...input, source: { keys: jwtVerificationKeys(input.source.keys) } };
    await this.checkSource(input.source);
    if (input.issuer.length === 0 || input.issuer.length > 512) throw invalid('issuer must be 1 to 512 characters.');
    if (input.audience.length === 0 || input.audience.length > 512) throw invalid('audience must be 1 to 512 characters.');
    const row: TrustedIssuer = { id: randomUUID(), issuer: input.issuer, audience: input.audience, source: input.source, createdAt: new Date() };
    return this.ports.uow.run(async (tx) => {
      if (await tx.clientKeys.trustedIssuerNamed(row.issuer)) throw new ServiceError('conflict', 'This issuer is already trusted.');
      await tx.clientKeys.insertTrustedIssuer(row);
      await tx.audit.insert(auditEvents.adminChange('workload_issuer.created', { ...by, issuerId: row.id, fields: ['issuer', 'audience', row.source.keys ? 'jwks' : 'jwks_uri'] }));
      tx.afterCommit(() => this.ports.bus.publish({ kind: 'client_keys' }));
      return row;
    });
  }

  listIssuers(): Promise<TrustedIssuer[]> {
    return this.ports.store.listTrustedIssuers();
  }

  /** Deletes the issuer and its bindings, and takes back the tokens of every agent bound through it. */
  async deleteIssuer(issuerId: string, by: ChangeBy): Promise<void> {
    const bindings = await this.ports.store.listBindings(issuerId.toLowerCase());
    await this.ports.uow.run(async (tx) => {
      if (!(await tx.clientKeys.deleteTrustedIssuer(issuerId.toLowerCase()))) throw notFound('trusted issuer');
      for (const agentId of new Set(bindings.map((b) => b.agentId))) await this.revokeEverywhere(tx, agentId);
      await tx.audit.insert(auditEvents.adminChange('workload_issuer.deleted', { ...by, issuerId: issuerId.toLowerCase() }));
      tx.afterCommit(() => this.ports.bus.publish({ kind: 'client_keys' }));
    });
  }

  async bind(issuerId: string, subject: string, agentId: string, by: ChangeBy): Promise<WorkloadBinding> {
    await this.everyInstanceReads();
    if (subject.length === 0 || subject.length > 512) throw invalid('subject must be 1 to 512 characters.');
    return this.ports.uow.run(async (tx) => {
      const issuer = await tx.clientKeys.getTrustedIssuer(issuerId.toLowerCase());
      if (!issuer) throw notFound('trusted issuer');
      const agent = await tx.store.getAgent(agentId.toLowerCase());
      if (!agent) throw notFound();
      const row: WorkloadBinding = { issuerId: issuer.id, subject, agentId: agent.id, apiKeyId: agent.apiKeyId, createdAt: new Date() };
      if (!(await tx.clientKeys.insertBinding(row))) throw new ServiceError('conflict', 'This subject of this issuer is already bound to an agent.');
      await tx.audit.insert(auditEvents.adminChange('workload_binding.created', { ...by, agentId: agent.id, issuerId: issuer.id, subject }));
      tx.afterCommit(() => this.ports.bus.publish({ kind: 'client_keys' }));
      return row;
    });
  }

  listBindings(issuerId: string): Promise<WorkloadBinding[]> {
    return this.ports.store.listBindings(issuerId.toLowerCase());
  }

  /** Unbinds the workload and takes back the tokens its agent holds. */
  async unbind(issuerId: string, subject: string, by: ChangeBy): Promise<void> {
    await this.ports.uow.run(async (tx) => {
      const agentId = await tx.clientKeys.deleteBinding(issuerId.toLowerCase(), subject);
      if (agentId === null) throw notFound('binding');
      await this.revokeEverywhere(tx, agentId);
      await tx.audit.insert(auditEvents.adminChange('workload_binding.deleted', { ...by, agentId, issuerId: issuerId.toLowerCase(), subject }));
      tx.afterCommit(() => this.ports.bus.publish({ kind: 'client_keys' }));
    });
  }

  private async keyAgent(tx: Transaction, agentId: string): Promise<{ agent: AgentRecord; source: KeySource }> {
    const agent = await tx.store.getAgent(agentId.toLowerCase());
    if (!agent) throw notFound();
    const source = await tx.clientKeys.agentKeysOf(agent.id);
    if (!source) throw new ServiceError('conflict', 'This agent authenticates with a secret (token_endpoint_auth_method client_secret_basic), not with keys.');
    return { agent, source };
  }

  private async checkSource(source: KeySource, options: { allowEmpty?: boolean } = {}): Promise<void> {
    if (source.jwksUri !== undefined) {
      const problem = this.ports.verifier.checkJwksUri(source.jwksUri);
      if (problem) throw invalid(`jwks_uri: ${problem}`);
      return;
    }
    if (source.keys.length === 0 && !options.allowEmpty) throw invalid('jwks.keys must hold at least one key.');
    if (source.keys.length > MAX_KEYS_PER_AGENT) throw invalid(`jwks.keys holds at most ${MAX_KEYS_PER_AGENT} keys.`);
    const kids = new Set<string>();
    for (const [i, key] of source.keys.entries()) {
      const problem = await this.ports.verifier.checkPublicKey(key);
      if (problem) throw invalid(`jwks.keys[${i}]: ${problem}`);
      if (kids.has(key.kid)) throw invalid(`jwks.keys[${i}]: kid "${key.kid}" appears twice.`);
      kids.add(key.kid);
    }
  }

  private async revokeEverywhere(tx: Transaction, agentId: string): Promise<void> {
    const grants = await tx.store.listGrants(agentId);
    await this.revocations.agent(tx, agentId, grants.map((g) => g.platformId));
  }

  /** Every instance re-reads the agent's keys (and drops its cached view) once this commits. */
  private told(tx: Transaction, apiKeyId: string): void {
    tx.afterCommit(() => this.ports.bus.publish({ kind: 'agent', apiKeyId }));
  }
}

