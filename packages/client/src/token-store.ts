// One token per platform, reused until shortly before it expires. Every fetch is single-flight: however
// many requests need a token (at first use, near expiry, or after the platform answered 401), they all
// wait on the same token request.
import type { IssuedToken } from './service-api.js';

interface Entry {
  token?: string;
  /** From here on the token is renewed before use. */
  renewAt: number;
  expiresAt: number;
  pending?: Promise<string>;
  /** The last token fetched because the platform refused its predecessor, and when. */
  replacement?: { token: string; at: number };
}

/**
 * A token that itself replaced a refused one and is refused again this soon is not replaced again: the
 * platform refuses every token (misconfigured issuer, clock, ...), and a new token per request would only
 * spend the agent's rate limit.
 */
const REPLACEMENT_INTERVAL_MS = 5000;

export class TokenStore {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly issue: (platformId: string) => Promise<IssuedToken>,
    /** Renew this long before expiry (capped at a quarter of the lifetime, for very short-lived tokens). */
    private readonly renewSkewSeconds: number,
  ) {}

  /** A token that is not about to expire, fetching one if needed. */
  get(platformId: string): Promise<string> {
    const entry = this.entry(platformId);
    if (entry.pending) return entry.pending;
    if (entry.token && Date.now() < entry.renewAt) return Promise.resolve(entry.token);
    // Near expiry the old token is still good as a fallback should the renewal fail.
    return this.renew(platformId, entry, true);
  }

  /** Whether a 401 for `rejected` is worth a new token (see REPLACEMENT_INTERVAL_MS). */
  mayReplace(platformId: string, rejected: string): boolean {
    const entry = this.entry(platformId);
    if (entry.pending || entry.token !== rejected) return true;
    return !(entry.replacement?.token === rejected && Date.now() - entry.replacement.at < REPLACEMENT_INTERVAL_MS);
  }

  /**
   * The platform refused `rejected` with 401: get a new token, once. If someone already replaced it (or is
   * replacing it), share that instead of asking again.
   */
  replace(platformId: string, rejected: string): Promise<string> {
    const entry = this.entry(platformId);
    if (entry.pending) return entry.pending;
    if (entry.token && entry.token !== rejected && Date.now() < entry.renewAt) return Promise.resolve(entry.token);
    entry.token = undefined;
    const pending = this.renew(platformId, entry, false);
    void pending.then((token) => (entry.replacement = { token, at: Date.now() })).catch(() => {});
    return pending;
  }

  private entry(platformId: string): Entry {
    let entry = this.entries.get(platformId);
    if (!entry) {
      entry = { renewAt: 0, expiresAt: 0 };
      this.entries.set(platformId, entry);
    }
    return entry;
  }

  private renew(platformId: string, entry: Entry, fallBackToCurrent: boolean): Promise<string> {
    const previous = entry.token;
    const pending = (async () => {
      // The lifetime counts from before the request was sent, so our idea of expiry is never late.
      const startedAt = Date.now();
      try {
        const issued = await this.issue(platformId);
        const lifetimeMs = issued.expiresInSeconds * 1000;
        entry.token = issued.accessToken;
        entry.expiresAt = startedAt + lifetimeMs;
        entry.renewAt = entry.expiresAt - Math.min(this.renewSkewSeconds * 1000, lifetimeMs / 4);
        return issued.accessToken;
      } catch (error) {
        if (fallBackToCurrent && previous && Date.now() < entry.expiresAt) return previous;
        throw error;
      }
    })();
    entry.pending = pending;
    void pending
      .finally(() => {
        if (entry.pending === pending) entry.pending = undefined;
      })
      .catch(() => {});
    return pending;
  }
}
