// Taking tokens back: admin changes append entries to per-platform revocation logs (one entry per
// platform the change concerns) in their own unit of work, and every instance is told after the commit.
// The transmitter that serves and pushes the entries is beside it (transmitter.ts, stream.ts, set-signing.ts).
import type { InvalidationBus } from '../ports/invalidation.js';
import type { RevocationTarget } from '../ports/revocation-log.js';
import type { Transaction } from '../ports/unit-of-work.js';

/**
 * What the admin-side domain services call, inside their unit of work: the entries are appended in the
 * change's own transaction and every instance is told after the commit. The no-op default keeps the
 * services usable without a feed.
 */
export interface Revocations {
  /** Tokens of `agentId` for these platforms (only ones it held a grant on) issued until now are void. */
  agent(tx: Transaction, agentId: string, platformIds: string[]): Promise<void>;
  /** Every token for the platform issued until now is void (suspension, disabling). */
  platform(tx: Transaction, platformId: string): Promise<void>;
  /** Every token signed with `kid` is void (retirement). */
  key(tx: Transaction, kid: string): Promise<void>;
}

export const NO_REVOCATIONS: Revocations = {
  agent: async () => {},
  platform: async () => {},
  key: async () => {},
};

export interface RevocationServicePorts {
  bus: InvalidationBus;
  tokenTtlSeconds: number;
  clockSkewSeconds: number;
  /** Tokens issued up to this many seconds after the change are void too (stale caches elsewhere). */
  issuedSlackSeconds: number;
}

export class RevocationService implements Revocations {
  constructor(private readonly ports: RevocationServicePorts) {}

  async agent(tx: Transaction, agentId: string, platformIds: string[]): Promise<void> {
    if (platformIds.length === 0) return;
    const now = await tx.revocationLog.databaseNow();
    return this.append(tx, { kind: 'agent', agentId, platformIds, iatMax: this.iatMax(now) }, now);
  }

  async platform(tx: Transaction, platformId: string): Promise<void> {
    const now = await tx.revocationLog.databaseNow();
    return this.append(tx, { kind: 'platform', platformId, iatMax: this.iatMax(now) }, now);
  }

  async key(tx: Transaction, kid: string): Promise<void> {
    return this.append(tx, { kind: 'key', kid }, await tx.revocationLog.databaseNow());
  }

  /** From the database's clock, never this instance's: a cut-off must not depend on which instance took the change. */
  private iatMax(databaseNow: number): number {
    return Math.floor(databaseNow / 1000) + this.ports.issuedSlackSeconds;
  }

  private async append(tx: Transaction, target: RevocationTarget, databaseNow: number): Promise<void> {
    const entries = await tx.revocationLog.append(target, revocationExpiry(target, this.ports.tokenTtlSeconds + this.ports.clockSkewSeconds, databaseNow));
    if (entries.length === 0) return;
    const platformIds = [...new Set(entries.map((e) => e.platformId))];
    // Told only once committed: a notice of an entry that was rolled back would send feeds after nothing.
    // The bus applies locally first, then reaches the other instances.
    tx.afterCommit(() => this.ports.bus.publish({ kind: 'revocation', platformIds, at: Date.now() }));
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
