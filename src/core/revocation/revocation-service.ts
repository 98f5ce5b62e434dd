// Taking tokens back: admin changes append entries to per-platform revocation logs (one entry per
// platform the change concerns), and every instance is told. The feed that serves and pushes the entries
// is a transport (adapters/http/revocation-feed.ts).
import type { InvalidationBus } from '../ports/invalidation.js';
import type { RevocationStore, RevocationTarget } from '../ports/revocation-log.js';

/** What the admin-side domain services call. The no-op default keeps them usable without a feed. */
export interface Revocations {
  /** Tokens of `agentId` for these platforms (only ones it held a grant on) issued until now are void. */
  agent(agentId: string, platformIds: string[]): Promise<void>;
  /** Every token for the platform issued until now is void (suspension, disabling). */
  platform(platformId: string): Promise<void>;
  /** Every token signed with `kid` is void (retirement). */
  key(kid: string): Promise<void>;
  /** Agents whose grant on the platform holds one of `scopes`. */
  agentsHoldingScopes(platformId: string, scopes: string[]): Promise<string[]>;
}

export const NO_REVOCATIONS: Revocations = {
  agent: async () => {},
  platform: async () => {},
  key: async () => {},
  agentsHoldingScopes: async () => [],
};

export interface RevocationServicePorts {
  log: RevocationStore;
  bus: InvalidationBus;
  tokenTtlSeconds: number;
  clockSkewSeconds: number;
  /** Tokens issued up to this many seconds after the change are void too (stale caches elsewhere). */
  issuedSlackSeconds: number;
}

export class RevocationService implements Revocations {
  constructor(private readonly ports: RevocationServicePorts) {}

  agent(agentId: string, platformIds: string[]): Promise<void> {
    if (platformIds.length === 0) return Promise.resolve();
    return this.append({ kind: 'agent', agentId, platformIds, iatMax: this.iatMax() });
  }

  platform(platformId: string): Promise<void> {
    return this.append({ kind: 'platform', platformId, iatMax: this.iatMax() });
  }

  key(kid: string): Promise<void> {
    return this.append({ kind: 'key', kid });
  }

  agentsHoldingScopes(platformId: string, scopes: string[]): Promise<string[]> {
    return this.ports.log.agentsHoldingScopes(platformId, scopes);
  }

  private iatMax(): number {
    return Math.floor(Date.now() / 1000) + this.ports.issuedSlackSeconds;
  }

  private async append(target: RevocationTarget): Promise<void> {
    const entries = await this.ports.log.append(target, revocationExpiry(target, this.ports.tokenTtlSeconds + this.ports.clockSkewSeconds));
    if (entries.length === 0) return;
    const platformIds = [...new Set(entries.map((e) => e.platformId))];
    // The bus applies locally first, then reaches the other instances.
    await this.ports.bus.publish({ kind: 'revocation', platformIds, at: Date.now() });
  }
}

/**
 * When an entry stops mattering: every token it can hit was issued by iat_max (or, for a key, by now), so
 * it expires within the token lifetime plus clock skew.
 */
export function revocationExpiry(target: RevocationTarget, lifetimeSeconds: number, now = Date.now()): Date {
  const from = target.kind === 'key' ? now / 1000 : target.iatMax;
  return new Date(Math.ceil(from + lifetimeSeconds) * 1000);
}
