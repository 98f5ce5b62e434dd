// Agent authentication: api_key_id + secret → the agent's view. Unknown id, wrong secret and wrong secret
// during a rotation's grace fail the same way at the same cost (one argon2 verification each: a decoy hash
// stands in for an unknown id, and the secret's hint picks which of two hashes to verify, secret-hint.ts),
// and failures are
// limited per client address before any argon2 work is spent on that address: a point of its budget is
// reserved before argon2 runs, and it may hold only a few slots of the argon2 queue.
import { randomBytes } from 'node:crypto';
import { CredentialRefusal, ServiceError } from '../errors.js';
import type { AgentCredentials, AgentView } from '../model.js';
import type { Store } from '../ports/store.js';
import type { SecretHasher } from '../ports/crypto.js';
import type { AttemptLimits } from '../ports/limits.js';
import type { InvalidationBus } from '../ports/invalidation.js';
import type { Telemetry } from '../ports/telemetry.js';
import type { Argon2Share } from './argon2-share.js';
import type { VerifiedCredentials } from './verified-cache.js';
import { hashesToVerify, hintedSalt } from './secret-hint.js';

export interface AuthenticatorPorts {
  store: Store;
  hasher: SecretHasher;
  limits: AttemptLimits;
  /** Secrets verified recently, so a warm agent costs no argon2 (dropped on every invalidation of the agent). */
  verified: VerifiedCredentials;
  /** Each address's share of the argon2 queue. */
  share: Argon2Share;
  bus: InvalidationBus;
  telemetry: Telemetry;
}

export interface Caller {
  apiKeyId: string;
  secret: string;
  address: string;
  signal?: AbortSignal;
}

export class Authenticator {
  /** Stands in for the hash of an unknown api_key_id: every check verifies one hash. */
  private decoy = '';

  private readonly store: Store;
  private readonly hasher: SecretHasher;
  private readonly limits: AttemptLimits;
  private readonly verified: VerifiedCredentials;
  private readonly share: Argon2Share;
  private readonly telemetry: Telemetry;

  constructor(ports: AuthenticatorPorts) {
    ({ store: this.store, hasher: this.hasher, limits: this.limits, verified: this.verified, share: this.share, telemetry: this.telemetry } = ports);
    const verified = this.verified;
    ports.bus.subscribe((message) => {
      if (message.kind === 'agent') verified.forget(message.apiKeyId);
      else if (message.kind === 'agents') message.apiKeyIds.forEach((id) => verified.forget(id));
      else if (message.kind === 'all') verified.clear();
    });
  }

  /** Hashes a random secret with the pool's own parameters, so a decoy verification costs what a real one does. */
  async init(): Promise<void> {
    const secret = randomBytes(32).toString('base64url');
    this.decoy = await this.hasher.hashSecret(secret, hintedSalt(secret));
  }

  /** Returns the authenticated agent's view, or throws 401 `invalid_credentials` (or 429, 503). */
  async authenticate(caller: Caller): Promise<AgentView> {
    // A locked-out address is refused before the verified-secret memory can let it in (in memory, no I/O).
    this.limits.assertNotLockedOut(caller.address);
    const rememberedAgent = this.verified.match(caller.apiKeyId, caller.secret);
    this.telemetry.record({ type: 'verified_memory', hit: rememberedAgent !== undefined });
    if (rememberedAgent !== undefined) {
      const view = await this.store.getAgentView(caller.apiKeyId);
      if (view && view.agentId === rememberedAgent) return view;
    }

    // Cold path: argon2id. A full queue refuses first, before any store or limiter work. One point of the
    // address's failure budget is reserved before any argon2 work: a wrong secret keeps it; success, and
    // refusals that are ours (store, pool, queue share), give it back.
    this.hasher.refuseIfVerificationsFull();
    const refund = await this.limits.reserveAuthAttempt(caller.address);
    let checked: Checked;
    try {
      checked = await this.checkSecret(caller);
    } catch (error) {
      refund();
      throw error;
    }
    const { credentials, matched, generation } = checked;
    // The audit trail names the agent whose key id exists (never sent to the client).
    if (!credentials || matched < 0) throw new CredentialRefusal('invalid_credentials', credentials?.hashes.agentId);
    refund();
    const { hashes } = credentials;
    // The view read with the hashes, unless something about the agent changed meanwhile (then read again).
    const view = await this.store.getAgentView(caller.apiKeyId, credentials);
    if (!view) throw new ServiceError('invalid_credentials'); // deleted between the two reads
    const validUntil = matched === 1 ? hashes.previousExpiresAt?.getTime() : undefined;
    this.verified.remember(caller.apiKeyId, caller.secret, view.agentId, generation, validUntil);
    return view;
  }

  /** One credential check in the argon2 pool, holding one of the address's few slots of the queue. */
  private async checkSecret(caller: Caller): Promise<Checked> {
    const leave = this.share.enter(caller.address);
    try {
      const generation = this.verified.generation;
      const credentials = await this.store.getAgentCredentials(caller.apiKeyId);
      const hashes = credentials?.hashes;
      // One verification in one task, whatever the agent's state: the decoy for an unknown id, else the
      // hash the secret's hint points at (both only for hashes older than hints).
      const which = hashes ? hashesToVerify(caller.secret, hashes) : [];
      const candidates = hashes ? which.map((i) => (i === 0 ? hashes.current : hashes.previous!)) : [this.decoy];
      const index = await this.hasher.verifySecret({ hashes: candidates, secret: caller.secret }, caller.signal);
      this.telemetry.record({ type: 'credential_checked' }); // counted once it ran (a task refused by a full queue did not)
      // Only a real hash can match (the decoy's secret was random and thrown away), but never trust it.
      const matched = hashes && index >= 0 ? which[index] : -1;
      return { credentials, matched, generation };
    } finally {
      leave();
    }
  }
}

interface Checked {
  credentials: AgentCredentials | null;
  /** Index of the matching candidate, or -1. */
  matched: number;
  /** The verified-secret memory's generation before the hashes were read. */
  generation: number;
}
