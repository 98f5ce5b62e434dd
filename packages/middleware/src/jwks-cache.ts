// The service's public keys, cached the way the contract asks: kept for the response's Cache-Control
// max-age, revalidated with If-None-Match, and fetched again at once when a token names an unknown `kid`.
// A cooldown puts a floor under the time between two fetches, so a flood of tokens with forged `kid`s
// costs the service at most one JWKS request per cooldown, however many arrive.
import { createLocalJWKSet } from 'jose/jwks/local';
import type { JSONWebKeySet, JWK, JWSHeaderParameters, LocalJWKSet } from 'jose';
import { webRs256, type Rs256 } from './rs256.js';

export interface JwksCacheOptions {
  url: string;
  fetch: typeof fetch;
  /** Minimum time between two fetches (and minimum cache lifetime). */
  cooldownMs: number;
  /** Used when the response has no usable max-age. */
  defaultMaxAgeMs: number;
  /** Upper bound of the cache lifetime, whatever the service says. */
  maxMaxAgeMs: number;
  timeoutMs: number;
  /** How access tokens' keys are imported and signatures checked (WebCrypto when absent). */
  rs256?: Rs256;
}

/** The key set could not be fetched and nothing usable is cached (or the refresh for a new kid failed). */
export class JwksUnavailableError extends Error {
  readonly code = 'ERR_ACE_JWKS_UNAVAILABLE';
  constructor(cause: unknown) {
    super('the signing keys of the service could not be fetched', { cause });
    this.name = 'JwksUnavailableError';
  }
}

/** The token's `kid` is not among the service's published keys, even after a refresh. */
export class UnknownKeyError extends Error {
  readonly code = 'ERR_ACE_UNKNOWN_KEY';
  constructor() {
    super('unknown signing key');
    this.name = 'UnknownKeyError';
  }
}

const FORCED_GAP_MS = 200;

export class JwksCache {
  private resolver: LocalJWKSet | undefined;
  private kids = new Set<string>();
  /** The published keys by kid (the first of a kid), and each imported once, for access tokens. */
  private jwkByKid = new Map<string, JWK>();
  private imported = new Map<string, Promise<unknown>>();
  private etag: string | undefined;
  private expiresAt = 0;
  /** When the last fetch started (successful or not): the cooldown counts from here. */
  private lastFetchAt = Number.NEGATIVE_INFINITY;
  private inflight: Promise<void> | undefined;
  /** One shared wait for the end of the cooldown, joined by every request with an unknown kid. */
  private scheduled: Promise<void> | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private releaseWaiters: (() => void) | undefined;
  private lastError: unknown;
  private readonly forcedKids = new Set<string>();

  constructor(private readonly options: JwksCacheOptions) {}

  /** Fetches now unless a fresh copy is held; rejects when the keys cannot be had. */
  async prefetch(): Promise<void> {
    if (this.resolver && Date.now() < this.expiresAt) return;
    await this.refresh();
    if (!this.resolver) throw new JwksUnavailableError(this.lastError);
  }

  /** The key for a JWS header, refreshing (within the cooldown rules) when its kid is not known. */
  async keyFor(header: JWSHeaderParameters): Promise<Awaited<ReturnType<LocalJWKSet>>> {
    await this.requireKid(header);
    return this.resolver!(header);
  }

  /**
   * The access token's verification key for its kid, imported once per key set (rs256.ts), with keyFor's
   * refresh rules; UnknownKeyError for a kid not published or a key not usable for RS256.
   */
  async verificationKey(header: JWSHeaderParameters): Promise<unknown> {
    const kid = await this.requireKid(header);
    let key = this.imported.get(kid);
    if (!key) {
      const rs256 = this.options.rs256 ?? webRs256;
      // A key that cannot be imported is as good as absent (the token is then signed with an unknown key).
      key = Promise.resolve()
        .then(() => rs256.importKey(this.jwkByKid.get(kid)!))
        .catch(() => undefined);
      this.imported.set(kid, key);
    }
    const imported = await key;
    if (imported === undefined) throw new UnknownKeyError();
    return imported;
  }

  /** The header's kid once the key set (fetched now if need be, within the cooldown rules) publishes it. */
  private async requireKid(header: JWSHeaderParameters): Promise<string> {
    if (!this.resolver) {
      // Nothing cached yet: join or start a fetch, but while a failed fetch's cooldown runs, fail fast.
      const cooling = !this.inflight && Date.now() < this.lastFetchAt + this.options.cooldownMs;
      if (!cooling) await this.refresh();
      if (!this.resolver) throw new JwksUnavailableError(this.lastError);
    } else if (Date.now() >= this.expiresAt) {
      // Stale while revalidate: the old keys answer this request, the refresh runs beside it.
      void this.refreshRespectingCooldown();
    }
    // The service always names the key; a token without a kid is not one of its tokens.
    if (typeof header.kid !== 'string') throw new UnknownKeyError();
    if (!this.kids.has(header.kid)) {
      const before = this.resolver;
      await this.refreshRespectingCooldown();
      if (!this.kids.has(header.kid)) {
        // The refresh itself failed: say "unavailable" rather than "forged", the key may be genuine.
        if (this.resolver === before && this.lastError !== undefined) throw new JwksUnavailableError(this.lastError);
        throw new UnknownKeyError();
      }
    }
    return header.kid;
  }

  /**
   * Whether the key set as last fetched publishes `kid` (for tokens verified before: a kid gone from it was
   * retired). Starts the refresh of a stale key set, as keyFor does, so retirements are seen in time.
   */
  isPublished(kid: string): boolean {
    if (this.resolver && Date.now() >= this.expiresAt) void this.refreshRespectingCooldown();
    return this.kids.has(kid);
  }

  /**
   * For revocation feed SETs: a kid not yet known is fetched at once instead of after the cooldown (a key
   * retirement is signed with the key that replaced it, which verifiers may not have fetched yet). Each
   * unknown kid forces at most one fetch, and forced fetches are at least FORCED_GAP_MS apart, so frames
   * with invented kids cannot turn into a flood of JWKS requests.
   */
  async keyForFeed(header: JWSHeaderParameters): Promise<Awaited<ReturnType<LocalJWKSet>>> {
    const kid = header.kid;
    if (this.resolver && typeof kid === 'string' && !this.kids.has(kid) && !this.forcedKids.has(kid) && Date.now() - this.lastFetchAt >= FORCED_GAP_MS) {
      if (this.forcedKids.size >= 64) this.forcedKids.clear();
      this.forcedKids.add(kid);
      await this.refresh();
    }
    return this.keyFor(header);
  }

  /** Cancels a pending cooldown wait; requests waiting on it go on with the keys they have. */
  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.releaseWaiters?.();
  }

  /** Joins the running fetch, or fetches now, or waits with everyone else for the cooldown to end. */
  private refreshRespectingCooldown(): Promise<void> {
    if (this.inflight) return this.inflight;
    if (this.scheduled) return this.scheduled;
    const wait = this.lastFetchAt + this.options.cooldownMs - Date.now();
    if (wait <= 0) return this.refresh();
    this.scheduled = new Promise<void>((resolve) => {
      const done = (next: Promise<void> | undefined) => {
        this.timer = undefined;
        this.scheduled = undefined;
        this.releaseWaiters = undefined;
        resolve(next);
      };
      this.releaseWaiters = () => done(undefined);
      this.timer = setTimeout(() => done(this.refresh()), wait);
      this.timer.unref?.();
    });
    return this.scheduled;
  }

  /** One fetch at a time; never rejects (failures are kept in lastError, old keys stay in use). */
  private refresh(): Promise<void> {
    this.inflight ??= this.fetchOnce().finally(() => {
      this.inflight = undefined;
    });
    return this.inflight;
  }

  private async fetchOnce(): Promise<void> {
    this.lastFetchAt = Date.now();
    try {
      const response = await this.options.fetch(this.options.url, {
        headers: { accept: 'application/json', ...(this.etag && this.resolver ? { 'if-none-match': this.etag } : {}) },
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
      if (response.status === 304 && this.resolver) {
        await response.body?.cancel();
        this.expiresAt = Date.now() + this.maxAgeMs(response.headers.get('cache-control'));
        this.lastError = undefined;
        return;
      }
      if (response.status !== 200) {
        await response.body?.cancel();
        throw new Error(`JWKS answered HTTP ${response.status}`);
      }
      const body = (await response.json()) as JSONWebKeySet;
      if (!body || !Array.isArray(body.keys)) throw new Error('JWKS response has no "keys" array');
      // Only RSA signature keys for RS256 are of use; anything else is ignored rather than trusted.
      const keys = body.keys.filter(
        (k) => k && k.kty === 'RSA' && typeof k.kid === 'string' && (k.use ?? 'sig') === 'sig' && (k.alg ?? 'RS256') === 'RS256',
      );
      this.resolver = createLocalJWKSet({ keys });
      this.kids = new Set(keys.map((k) => k.kid as string));
      const byKid = new Map<string, JWK>();
      for (const k of keys) if (!byKid.has(k.kid as string)) byKid.set(k.kid as string, k);
      this.jwkByKid = byKid;
      this.imported = new Map();
      this.etag = response.headers.get('etag') ?? undefined;
      this.expiresAt = Date.now() + this.maxAgeMs(response.headers.get('cache-control'));
      this.lastError = undefined;
    } catch (error) {
      this.lastError = error;
    }
  }

  private maxAgeMs(cacheControl: string | null): number {
    const match = /(?:^|,)\s*max-age\s*=\s*"?(\d+)"?/i.exec(cacheControl ?? '');
    const declared = match ? Number(match[1]) * 1000 : this.options.defaultMaxAgeMs;
    // Never below the cooldown (a max-age=0 must not turn into a fetch per request), never above the cap.
    return Math.min(Math.max(declared, this.options.cooldownMs), this.options.maxMaxAgeMs);
  }
}
