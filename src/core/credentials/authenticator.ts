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
import type { AttemptLimits, AuthAttempt } from '../ports/limits.js';
import type { InvalidationBus } from '../ports/invalidation.js';
import type { Telemetry } from '../ports/telemetry.js';
import type { Argon2Share } from './argon2-share.js';
import type { Authenticated } from './client-authentication.js';
import type { VerifiedCredentials, VerifiedStamp } from './verified-cache.js';
import type { SharedVerifiedMemory } from '../ports/verified-memory.js';
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
  /** Secrets verified by any instance (Redis); absent on the embedded default. */
  shared?: SharedVerifiedMemory;
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
  private readonly shared: SharedVerifiedMemory | undefined;

  constructor(ports: AuthenticatorPorts) {
    ({ store: this.store, hasher: this.hasher, limits: this.limits, verified: this.verified, share: this.share, telemetry: this.telemetry, shared: this.shared } =
      ports);
    const verified = this.verified;
    ports.bus.subscribe((message) => {
      if (message.kind === 'agent') verified.forget(message.apiKeyId);
      else if (message.kind === 'agents') message.apiKeyIds.forEach((id) => verified.forget(id));
      // Changes may have been missed (a reconnect, an unknown outcome): re-check, do not forget.
      else if (message.kind === 'all') verified.recheckAll();
    });
  }

  /** Hashes a random secret with the pool's own parameters, so a decoy verification costs what a real one does. */
  async init(): Promise<void> {
    const secret = randomBytes(32).toString('base64url');
    this.decoy = await this.hasher.hashSecret(secret, hintedSalt(secret));
  }

  /** The authenticated agent's view and how it authenticated, or throws 401 `invalid_credentials` (or 429, 503). */
  async authenticate(caller: Caller): Promise<Authenticated> {
    return { view: await this.verify(caller), authentication: { method: 'client_secret', apiKeyId: caller.apiKeyId } };
  }

  private async verify(caller: Caller): Promise<AgentView> {
    // A locked-out address is refused before the verified-secret memory can let it in (in memory, no I/O).
    this.limits.assertNotLockedOut(caller.address);
    const rememberedAgent = this.verified.match(caller.apiKeyId, caller.secret);
    this.telemetry.record({ type: 'verified_memory', hit: rememberedAgent !== undefined });
    if (rememberedAgent !== undefined) {
      const view = await this.store.getAgentView(caller.apiKeyId);
      if (view && view.agentId === rememberedAgent) return view;
    }

    // A full queue refuses first, before any store or limiter work: shedding must stay cheap. (Agents
    // known without argon2 never enter the queue, so they do not fill it on a fresh instance.)
    this.hasher.refuseIfVerificationsFull();
    const recheck = this.verified.needsRecheck(caller.apiKeyId, caller.secret);
    if (!this.shared && !recheck) return this.verifyCold(caller, await this.limits.reserveAuthAttempt(caller.address));

    // The secret may be known without argon2: remembered here from before a possible missed invalidation,
    // or verified by another instance (or before a restart). Both are checked against the hashes
    // Postgres holds now. One point of the address's failure budget is reserved first, as for argon2, so a
    // wrong secret costs this read no more often than it costs a verification.
    const attempt = await this.limits.reserveAuthAttempt(caller.address);
    let prefetched: Prefetched;
    try {
      const stamp = this.verified.generation;
      const credentials = await this.store.getAgentCredentials(caller.apiKeyId);
      prefetched = { stamp, credentials };
      const known = await this.knownWithoutArgon2(caller, credentials, stamp, recheck);
      if (credentials && known >= 0) {
        const view = await this.accept(caller, { credentials, matched: known, generation: stamp });
        attempt.refund();
        return view;
      }
      this.hasher.refuseIfVerificationsFull(); // it may have filled meanwhile
    } catch (error) {
      attempt.refund();
      throw error;
    }
    return this.verifyCold(caller, attempt, prefetched);
  }

  /** The index (0 current, 1 previous) of the hash the secret is known to match without argon2, or -1. */
  private async knownWithoutArgon2(caller: Caller, credentials: AgentCredentials | null, stamp: VerifiedStamp, recheck: boolean): Promise<number> {
    // An unknown key id asks the shared memory about the decoy: its answer costs what a known one's does.
    const which = credentials ? hashesToVerify(caller.secret, credentials.hashes) : [];
    const candidates = credentials ? which.map((i) => (i === 0 ? credentials.hashes.current : credentials.hashes.previous!)) : [this.decoy];
    if (recheck) {
      const index = this.verified.recheck(caller.apiKeyId, caller.secret, candidates, stamp);
      if (credentials && index >= 0) return which[index];
    }
    if (!this.shared) return -1;
    const index = await this.shared.find(caller.apiKeyId, caller.secret, candidates);
    this.telemetry.record({ type: 'verified_shared', hit: credentials !== null && index >= 0 });
    return credentials && index >= 0 ? which[index] : -1;
  }

  /**
   * Cold path: argon2id. One point of the address's failure budget is reserved (`attempt`) before any
   * argon2 work: a wrong secret spends it as a failure; success, and refusals that are ours (store, pool,
   * queue share), give it back.
   */
  private async verifyCold(caller: Caller, attempt: AuthAttempt, prefetched?: Prefetched): Promise<AgentView> {
    let checked: Checked;
    try {
      checked = await this.checkSecret(caller, prefetched);
    } catch (error) {
      attempt.refund();
      throw error;
    }
    const { credentials, matched } = checked;
    if (!credentials || matched < 0) {
      await attempt.fail();
      // The audit trail names the agent whose key id exists (never sent to the client).
      throw new CredentialRefusal('invalid_credentials', credentials?.hashes.agentId, undefined, { method: 'client_secret', apiKeyId: caller.apiKeyId });
    }
    attempt.refund();
    const view = await this.accept(caller, { ...checked, credentials });
    // Other instances (and this one after a restart) need no argon2 for it. Not awaited: the answer does not wait on Redis.
    if (this.shared) {
      const hash = matched === 0 ? credentials.hashes.current : credentials.hashes.previous!;
      void this.shared.remember(caller.apiKeyId, caller.secret, hash, this.expiry(credentials, matched));
    }
    return view;
  }

  /** The view of a secret known to match hash `matched`; remembered in process. */
  private async accept(caller: Caller, checked: Checked & { credentials: AgentCredentials }): Promise<AgentView> {
    const { credentials, matched, generation } = checked;
    // The view read with the hashes, unless something about the agent changed meanwhile (then read again).
    const view = await this.store.getAgentView(caller.apiKeyId, credentials);
    if (!view) throw new ServiceError('invalid_credentials'); // deleted between the two reads
    const hash = matched === 0 ? credentials.hashes.current : credentials.hashes.previous!;
    this.verified.remember(caller.apiKeyId, caller.secret, view.agentId, generation, hash, matched === 1 ? this.expiry(credentials, 1) : undefined);
    return view;
  }

  /** A previous secret is good until its grace ends; the current one until the memory's own TTL. */
  private expiry(credentials: AgentCredentials, matched: number): number {
    return matched === 1 ? (credentials.hashes.previousExpiresAt?.getTime() ?? 0) : Infinity;
  }

  /** One credential check in the argon2 pool, holding one of the address's few slots of the queue. */
  private async checkSecret(caller: Caller, prefetched?: Prefetched): Promise<Checked> {
    const leave = this.share.enter(caller.address);
    try {
      const generation = prefetched?.stamp ?? this.verified.generation;
      const credentials = prefetched ? prefetched.credentials : await this.store.getAgentCredentials(caller.apiKeyId);
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
  generation: VerifiedStamp;
}

/** Credentials read before the cold path (with the memory's stamp read before them). */
interface Prefetched {
  stamp: VerifiedStamp;
  credentials: AgentCredentials | null;
}
