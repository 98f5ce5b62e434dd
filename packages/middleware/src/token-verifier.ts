// The token half of the verifier: from a request's Authorization header to a verified token or the refusal.
// Local checks only (token-check.ts: jose's jwtVerify rules; the RS256 signature on a key imported once per
// kid, rs256.ts), a token seen before answered from the bounded cache (verified-tokens.ts) and re-checked for
// what may have changed since (the clock, the JWKS, the revocation feed). Which route the token may reach is
// the verifier's (verifier.ts).
import type { JWTPayload } from 'jose';
import { JwksUnavailableError, UnknownKeyError, type JwksCache } from './jwks-cache.js';
import { invalidRequest, invalidToken, missingToken, unavailable, type Refusal } from './challenge.js';
import type { RevocationReceiver } from './revocation-feed.js';
import type { Rs256 } from './rs256.js';
import { checkClaims, takeApart, type TokenDefect } from './token-check.js';
import type { TokenDigest, VerifiedToken, VerifiedTokens } from './verified-tokens.js';
import { tokenAudience } from './protected-resource.js';

const TOKEN_PATTERN = /^[A-Za-z0-9\-._~+/]+=*$/; // RFC 6750 b64token

/**
 * Longest token accepted, in characters (= bytes: b64token is ASCII). The service's tokens are under
 * 1 KiB; a larger one is refused before it is decoded, so a validly signed 200 KB token costs nothing.
 */
export const MAX_TOKEN_LENGTH = 8192;

/**
 * The `typ` header each token profile (`svc_token_profile` claim) must carry, lower case, without the
 * optional "application/" prefix (RFC 7515 section 4.1.9). A token of one profile cannot pass as another.
 */
const PROFILE_TYP: Record<string, string> = {
  'svc-native-jwt': 'jwt',
  'oauth-at-jwt': 'at+jwt', // RFC 9068 section 2.1
};

/** The longest lifetime the service can give a token (TOKEN_TTL_SECONDS max): bounds `iat`'s age. */
const MAX_TOKEN_AGE_SECONDS = 86_400;

const REVOKED = 'The access token was revoked.';
const UNKNOWN_KEY = 'The access token is signed with an unknown key.';
const TOO_LARGE = `The access token is larger than ${MAX_TOKEN_LENGTH} bytes.`;
const MALFORMED = 'The access token is malformed.';
const BAD_SIGNATURE = 'The access token signature is invalid.';

/** What the token check is given: the verifier's settings and the parts it shares (keys, feed, cache). */
export interface TokenVerifierOptions {
  realm: string;
  issuer: string;
  platformId: string;
  /** Every `aud` a token may carry: the platform id and `resources`. */
  audiences: readonly string[];
  /** The resource identifiers accepted beside the platform id. */
  resources: readonly string[];
  clockTolerance: number;
  now: () => number;
  /** How long the JWKS waits before it is fetched again: the Retry-After of a 503 when no key can be had. */
  cooldownMs: number;
  jwks: JwksCache;
  feed: RevocationReceiver | undefined;
  verified: VerifiedTokens;
  tokenDigest: TokenDigest;
  rs256: Rs256;
}

/** A verified token and the token as presented, or the refusal. */
export type TokenCheckResult = { ok: true; token: VerifiedToken; raw: string } | Refusal;

/** Checks a request's Authorization header (one call per request). */
export type TokenVerifier = (authorization: string | string[] | undefined) => Promise<TokenCheckResult>;

export function createTokenVerifier({
  realm,
  issuer,
  platformId,
  audiences,
  resources,
  clockTolerance,
  now,
  cooldownMs,
  jwks,
  feed,
  verified,
  tokenDigest,
  rs256,
}: TokenVerifierOptions): TokenVerifier {
  return async function check(authorization: string | string[] | undefined): Promise<TokenCheckResult> {
    if (authorization === undefined || authorization === '') return missingToken(realm);
    if (Array.isArray(authorization)) return invalidRequest(realm, 'More than one Authorization header.');
    // Size first: nothing of an oversized header is split, matched or decoded ("Bearer " + token + slack).
    if (authorization.length > MAX_TOKEN_LENGTH + 64) return invalidToken(realm, TOO_LARGE);
    // The usual header of a token seen before: the same bytes (same SHA-256) passed the syntax checks below
    // when it was verified, so they are not split and matched again.
    const usual = authorization.startsWith('Bearer ') ? authorization.slice(7) : undefined;
    let usualKey: string | undefined;
    let known: VerifiedToken | undefined;
    if (usual !== undefined) {
      const digest = tokenDigest(usual);
      usualKey = typeof digest === 'string' ? digest : await digest;
      known = verified.get(usualKey);
    }
    let token: string;
    let cacheKey: string;
    if (known) {
      token = usual!;
      cacheKey = usualKey!;
    } else {
      const [scheme, ...rest] = authorization.trim().split(/\s+/);
      // Another scheme (Basic, ...) means no Bearer token was offered: the plain challenge, no error.
      if (scheme.toLowerCase() !== 'bearer') return missingToken(realm);
      if (rest.length !== 1 || !TOKEN_PATTERN.test(rest[0])) return invalidRequest(realm, 'Malformed Bearer credentials.');
      if (rest[0].length > MAX_TOKEN_LENGTH) return invalidToken(realm, TOO_LARGE);
      token = rest[0];
      if (token === usual) cacheKey = usualKey!;
      else {
        const digest = tokenDigest(token);
        cacheKey = typeof digest === 'string' ? digest : await digest;
      }
    }

    // The first request of a platform that never called ready() waits for the feed's first answer.
    if (feed) {
      try {
        await feed.start();
      } catch {
        // A first synchronisation that failed shows in the feed's verdict below (unavailable once stale).
      }
    }
    const outcome = known ? recheck(cacheKey, known) : await verifyToken(token, cacheKey);
    if (!('payload' in outcome)) return outcome;
    return { ok: true, token: outcome, raw: token };
  };

  /** What may have changed since a cached token was verified: the clock, the JWKS, the revocation feed. */
  function recheck(cacheKey: string, known: VerifiedToken): VerifiedToken | Refusal {
    const nowSeconds = Math.floor(now() / 1000);
    // As jose decides: expired at exp <= now - tolerance, or once older than the longest lifetime.
    if (known.exp <= nowSeconds - clockTolerance || nowSeconds - known.iat > MAX_TOKEN_AGE_SECONDS + clockTolerance) {
      verified.delete(cacheKey);
      return invalidToken(realm, 'The access token expired.');
    }
    if (feed?.isVoidKey(known.kid)) {
      verified.delete(cacheKey);
      return invalidToken(realm, REVOKED);
    }
    // A kid the JWKS no longer publishes: its key was retired (a fresh token of it would be refused too).
    if (!jwks.isPublished(known.kid)) {
      verified.delete(cacheKey);
      return invalidToken(realm, UNKNOWN_KEY);
    }
    const verdict = feed ? feed.check(known.payload as JWTPayload) : 'ok';
    if (verdict === 'revoked') {
      verified.delete(cacheKey);
      return invalidToken(realm, REVOKED);
    }
    if (verdict === 'unavailable') return unavailable(5);
    return known;
  }

  /** The whole check of a token not seen before; a valid one is kept in the cache. */
  async function verifyToken(token: string, cacheKey: string): Promise<VerifiedToken | Refusal> {
    // jose's jwtVerify rules (token-check.ts), the signature on a key imported once per kid (rs256.ts).
    const parts = takeApart(token);
    if ('kind' in parts) return invalidToken(realm, describeDefect(parts));
    const { header } = parts;
    let valid: boolean;
    try {
      if (feed?.isVoidKey(header.kid)) throw new RevokedError();
      const key = await jwks.verificationKey(header);
      valid = await rs256.verify(key, parts.signingInput, parts.signature);
    } catch (error) {
      if (error instanceof JwksUnavailableError) return unavailable(cooldownMs / 1000);
      // A key the runtime refuses to use for this signature counts as a signature that does not verify.
      return invalidToken(realm, error instanceof RevokedError || error instanceof UnknownKeyError ? describeTokenError(error) : BAD_SIGNATURE);
    }
    if (!valid) return invalidToken(realm, BAD_SIGNATURE);
    if (parts.unencoded) return invalidToken(realm, MALFORMED);
    const checked = checkClaims(parts.payloadSegment, { issuer, audiences, now: Math.floor(now() / 1000), clockTolerance, maxTokenAge: MAX_TOKEN_AGE_SECONDS });
    if ('kind' in checked) return invalidToken(realm, describeDefect(checked));
    const payload = checked.claims as JWTPayload;
    const typ = header.typ;
    const kid = header.kid as string; // verificationKey refused a token without one
    // jose checks sub's presence, not its type: the agent id is a string.
    if (typeof payload.sub !== 'string' || payload.sub === '') return invalidToken(realm, 'The access token has an invalid sub claim.');
    const profile = payload.svc_token_profile;
    const expectedTyp = typeof profile === 'string' && Object.hasOwn(PROFILE_TYP, profile) ? PROFILE_TYP[profile] : undefined;
    if (expectedTyp === undefined) return invalidToken(realm, 'The access token has an unknown profile.');
    if (typeof typ !== 'string' || typ.toLowerCase().replace(/^application\//, '') !== expectedTyp) {
      return invalidToken(realm, 'The access token has a type (typ) that does not match its profile.');
    }
    // Revoked before expiry: 401 invalid_token, so the agent client fetches a new token.
    const verdict = feed ? feed.check(payload) : 'ok';
    if (verdict === 'revoked') return invalidToken(realm, REVOKED);
    if (verdict === 'unavailable') return unavailable(5);
    // The service binds a token to exactly one platform: `aud` is the platform id, or (oauth-at-jwt for a
    // resource, RFC 9068) [resource, platform id]. Anything else is not a token it minted.
    const audience = tokenAudience(payload.aud, platformId, resources);
    if (audience === undefined) return invalidToken(realm, 'The access token has an unexpected audience.');
    const scopes = typeof payload.scope === 'string' ? payload.scope.split(' ').filter(Boolean) : [];
    const result: VerifiedToken = {
      payload: deepFreeze(payload),
      kid,
      scopes: Object.freeze(scopes),
      resource: audience.resource,
      exp: payload.exp as number,
      iat: payload.iat as number,
    };
    verified.set(cacheKey, result);
    return result;
  }
}

/** Freezes a verified payload and what it holds (`aud`, nested claims): it is shared among requests. */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const member of Object.values(value)) deepFreeze(member);
  }
  return value;
}

/** The token's key is void in the revocation feed. */
class RevokedError extends Error {}

/** A short, safe description for error_description (never echoes the token). */
function describeTokenError(error: unknown): string {
  if (error instanceof RevokedError) return REVOKED;
  if (error instanceof UnknownKeyError) return UNKNOWN_KEY;
  return MALFORMED;
}

/** The description of a defect the token checks found (the wording jose's errors were given). */
function describeDefect(defect: TokenDefect): string {
  switch (defect.kind) {
    case 'malformed':
      return MALFORMED;
    case 'crit':
      // An extension named in the `crit` header that this verifier does not implement (RFC 7515 section 4.1.11).
      return 'The access token names a critical header parameter (crit) that is not supported.';
    case 'alg':
      return 'The access token uses an algorithm that is not accepted.';
    case 'missing':
      return `The access token lacks the ${defect.claim} claim.`;
    case 'iss':
      return 'The access token has an unexpected issuer.';
    case 'aud':
      return 'The access token is meant for another platform.';
    case 'nbf':
      return 'The access token is not valid yet.';
    case 'expired':
      return 'The access token expired.';
    case 'future':
      return 'The access token is issued in the future.';
    case 'invalid':
      return `The access token has an invalid ${defect.claim} claim.`;
  }
}
