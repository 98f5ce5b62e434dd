// Agent authentication: api_key_id + secret → the agent's view. Unknown id and wrong secret fail the
// same way at the same cost (an unknown id is verified against a decoy hash), and failures are
// limited per client address before any argon2 work is spent on that address.
import { randomBytes } from 'node:crypto';
import { ServiceError } from '../../errors/catalog.js';
import type { CryptoPools } from '../../crypto/pools.js';
import type { Limiters } from '../../ratelimit/limiters.js';
import type { Metrics } from '../../metrics/metrics.js';
import type { AgentView, Store } from '../../storage/types.js';
import type { InvalidationBus } from '../../storage/cache/invalidation-bus.js';
import { VerifiedCredentials } from './verified-cache.js';
import { withAgent } from '../audit/events.js';

export interface Caller {
  apiKeyId: string;
  secret: string;
  address: string;
  signal?: AbortSignal;
}

export class Authenticator {
  private decoyHash = '';

  constructor(
    private readonly store: Store,
    private readonly pools: CryptoPools,
    private readonly limiters: Limiters,
    private readonly verified: VerifiedCredentials,
    private readonly metrics: Metrics,
    bus: InvalidationBus,
  ) {
    bus.subscribe((message) => {
      if (message.kind === 'agent') verified.forget(message.apiKeyId);
      else if (message.kind === 'agents') message.apiKeyIds.forEach((id) => verified.forget(id));
      else if (message.kind === 'all') verified.clear();
    });
  }

  /** Hashes a random secret with the pool's own parameters, so a decoy verification costs what a real one does. */
  async init(): Promise<void> {
    this.decoyHash = await this.pools.hashSecret(randomBytes(32).toString('base64url'));
  }

  /** Returns the authenticated agent's view, or throws 401 `invalid_credentials` (or 429, 503). */
  async authenticate(caller: Caller): Promise<AgentView> {
    const rememberedAgent = this.verified.match(caller.apiKeyId, caller.secret);
    this.metrics.cache('verified', rememberedAgent !== undefined);
    if (rememberedAgent !== undefined) {
      const view = await this.store.getAgentView(caller.apiKeyId);
      if (view && view.agentId === rememberedAgent) return view;
    }

    // Cold path: argon2id. Refuse at once an address that already spent its failure budget.
    await this.limiters.assertAddressAllowed(caller.address);
    const generation = this.verified.generation;
    const hashes = await this.store.getSecretHashes(caller.apiKeyId);
    const candidates = hashes ? [hashes.current, ...(hashes.previous ? [hashes.previous] : [])] : [this.decoyHash];
    const matched = await this.pools.verifySecret({ hashes: candidates, secret: caller.secret }, caller.signal);
    if (!hashes || matched < 0) {
      await this.limiters.recordAuthFailure(caller.address);
      // The audit trail names the agent whose key id exists (never sent to the client).
      throw withAgent(new ServiceError('invalid_credentials'), hashes?.agentId);
    }
    const view = await this.store.getAgentView(caller.apiKeyId);
    if (!view) throw new ServiceError('invalid_credentials'); // deleted between the two reads
    const validUntil = matched === 1 ? hashes.previousExpiresAt?.getTime() : undefined;
    this.verified.remember(caller.apiKeyId, caller.secret, view.agentId, generation, validUntil);
    return view;
  }
}
