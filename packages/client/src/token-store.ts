// One token per platform, reused until shortly before it expires. Every fetch is single-flight: however
// many requests need a token (at first use, near expiry, or after the platform answered 401), they share
// the same token request. Near expiry the renewal runs in the background: callers keep the still-valid
// token at once, so a service that is restarting (and retried for minutes) costs them nothing until the
// token really expires; from then on they wait on that same renewal.
import type { IssuedToken } from './service-api.js';

interface Entry {
  token?: string;
  /** From here on the token is renewed (in the background while it is still valid). */
  renewAt: number;
  expiresAt: number;
  pending?: Promise<string>;
  /** After a failed background renewal, the next one does not start before this. */
  retryRenewalAt: number;
  /** The last token fetched because the platform refused its predecessor, and when. */
  replacement?: { token: string; at: number };
}

/**
 * A token that itself replaced a refused one and is refused again this soon is not replaced again: the
 * platform refuses every token (misconfigured issuer, clock, ...), and a new token per request would only
 * spend the agent's rate limit.
 */
const REPLACEMENT_INTERVAL_MS = 5000;

/**
 * Gap after a failed background renewal. Retryable failures were already retried for the whole wait
 * budget inside that renewal; this only keeps a refusal (a revoked grant, a rotated secret) from being
 * asked again on every request while the old token lasts.
 */
export const RENEWAL_RETRY_GAP_MS = 5000;

export class TokenStore {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly issue: (platformId: string) => Promise<IssuedToken>,
    /** Renew this long before expiry (capped at a quarter of the lifetime, for very short-lived tokens). */
    private readonly renewSkewSeconds: number,
    /** Told about a background renewal that failed while the token in use was still valid. */
    private readonly onRenewalError?: (platformId: string, error: unknown) => void,
  ) {}

  /** A valid token: the cached one while it lasts (renewing it in the background near expiry), else a new one. */
  get(platformId: string): Promise<string> {
    const entry = this.entry(platformId);
    const now = Date.now();
    if (entry.token !== undefined && now < entry.expiresAt) {
      if (now >= entry.renewAt && !entry.pending && now >= entry.retryRenewalAt) this.renewInBackground(platformId, entry);
      return Promise.resolve(entry.token);
    }
    return entry.pending ?? this.renew(platformId, entry);
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
    if (entry.token !== undefined && entry.token !== rejected && Date.now() < entry.expiresAt) return Promise.resolve(entry.token);
    if (entry.pending) return entry.pending;
    entry.token = undefined;
    const pending = this.renew(platformId, entry);
    // The rejection is the caller's (returned just below); only a success is recorded here.
    pending.then(
      (token) => (entry.replacement = { token, at: Date.now() }),
      () => undefined,
    );
    return pending;
  }

  private entry(platformId: string): Entry {
    let entry = this.entries.get(platformId);
    if (!entry) {
      entry = { renewAt: 0, expiresAt: 0, retryRenewalAt: 0 };
      this.entries.set(platformId, entry);
    }
    return entry;
  }

  private renewInBackground(platformId: string, entry: Entry): void {
    this.renew(platformId, entry).catch((error: unknown) => {
      // Nobody waits on this renewal while the token is valid: the failure is reported, not thrown. A
      // caller arriving after expiry starts (and waits on) a renewal of its own and gets its error.
      entry.retryRenewalAt = Date.now() + RENEWAL_RETRY_GAP_MS;
      try {
        this.onRenewalError?.(platformId, error);
      } catch {
        // The caller's listener threw: that must not become an unhandled rejection of ours, and the
        // renewal's own failure was already handed over.
      }
    });
  }

  private renew(platformId: string, entry: Entry): Promise<string> {
    const pending = (async () => {
      // The lifetime counts from before the request was sent, so our idea of expiry is never late.
      const startedAt = Date.now();
      const issued = await this.issue(platformId);
      const lifetimeMs = issued.expiresInSeconds * 1000;
      entry.token = issued.accessToken;
      entry.expiresAt = startedAt + lifetimeMs;
      entry.renewAt = entry.expiresAt - Math.min(this.renewSkewSeconds * 1000, lifetimeMs / 4);
      entry.retryRenewalAt = 0;
      return issued.accessToken;
    })();
    entry.pending = pending;
    // Clears the slot either way; the rejection itself reaches whoever holds `pending`.
    const clearSlot = () => {
      if (entry.pending === pending) entry.pending = undefined;
    };
    pending.then(clearSlot, clearSlot);
    return pending;
  }
}
