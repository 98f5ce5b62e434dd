// Client assertions checked with jose (RFC 7523 §3): the signature by one of the keys the core names
// (inline, or a jwks_uri fetched through guarded-fetch.ts, cached, re-fetched on an unknown kid), the
// algorithm among ES256/RS256/PS256/EdDSA (never `none`, never HMAC: a shared-secret algorithm would let
// anyone who knows a public key sign), iss, sub, aud, exp, nbf and iat against the instance's clock.
// Imported key sets are kept by their content (bounded), so a warm check imports nothing, nor does a re-read
// of unchanged keys; `prepare` imports a set ahead of its first use.
import { createLocalJWKSet, createRemoteJWKSet, customFetch, decodeJwt, decodeProtectedHeader, errors, exportJWK, generateKeyPair, importJWK, jwtVerify, type CryptoKey, type JWTVerifyGetKey } from 'jose';
import { AssertionRejected, type AssertionExpectations, type ClaimedAssertion, type AssertionVerifier, type VerifiedAssertion } from '../../core/ports/assertions.js';
import type { KeySource } from '../../core/ports/client-keys.js';
import { BoundedCache } from '../../core/support/bounded-cache.js';
import { guardedFetch, refusedUri, type GuardedFetchOptions } from './guarded-fetch.js';

export const ASSERTION_ALGORITHMS = ['ES256', 'RS256', 'PS256', 'EdDSA'] as const;
/** Longer than any compact JWS a client has reason to send (keys, claims): bounds the work per request. */
const MAX_ASSERTION_LENGTH = 8192;
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];
const KID = /^[\x21-\x7e]{1,128}$/;
const REMOTE_SETS_MAX = 1000;
/** Inline key sets kept imported (least recently used goes first): one per key agent or issuer in use. */
const LOCAL_SETS_MAX = 50_000;
/** The algorithm a key is imported for when it names none (the one its kty is registered for). */
const DEFAULT_ALG: Record<string, string> = { RSA: 'RS256', EC: 'ES256', OKP: 'EdDSA' };

export interface JoseAssertionVerifierOptions extends Omit<GuardedFetchOptions, 'maxBytes'> {
  /** How long a fetched JWK Set is used before it is fetched again (seconds). */
  jwksCacheSeconds: number;
  /** An unknown kid fetches the set again at once, at most this often (seconds): random kids cannot flood the issuer. */
  jwksCooldownSeconds: number;
}

/** A key set nobody holds the private half of: what an unknown client's assertion is verified against. */
export async function decoyKeys(): Promise<KeySource> {
  const { publicKey } = await generateKeyPair('ES256');
  return { keys: [{ ...(await exportJWK(publicKey)), kid: 'decoy', alg: 'ES256' } as KeySource['keys'] extends (infer K)[] | undefined ? K : never] };
}

export class JoseAssertionVerifier implements AssertionVerifier {
  private readonly local = new BoundedCache<JWTVerifyGetKey>({ maxEntries: LOCAL_SETS_MAX, ttlMs: Infinity });
  private readonly remote = new Map<string, JWTVerifyGetKey>();
  /** One public key per algorithm, made on first use, nobody holds the private half of. */
  private readonly standIns = new Map<string, Promise<CryptoKey>>();
  private readonly fetchJwks: ReturnType<typeof guardedFetch>;

  constructor(private readonly options: JoseAssertionVerifierOptions) {
    this.fetchJwks = guardedFetch({ ...options, maxBytes: 64 * 1024 });
  }

  peek(assertion: string): ClaimedAssertion | undefined {
    if (assertion.length > MAX_ASSERTION_LENGTH) return undefined;
    try {
      const { iss, sub, jti } = decodeJwt(assertion);
      const { kid } = decodeProtectedHeader(assertion);
      const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
      return { issuer: text(iss), subject: text(sub), kid: text(kid), jti: text(jti) };
    } catch {
      return undefined; // not a JWT at all: the caller refuses it like any other failure
    }
  }

  async verify(assertion: string, expect: AssertionExpectations): Promise<VerifiedAssertion> {
    if (assertion.length > MAX_ASSERTION_LENGTH) throw new AssertionRejected('too_long');
    const now = Date.now() / 1000;
    let payload;
    let protectedHeader;
    // No key has the header's kid (an unknown client's decoy set, a kid the agent does not hold): a key nobody
    // holds the private half of stands in, so this check verifies one signature like a wrong key's, in the
    // same call, and fails like it; the reason counted stays "no matching key".
    let stoodIn = false;
    const keys = this.keysOf(expect.keys);
    const orStandIn: JWTVerifyGetKey = async (header, token) => {
      try {
        return await keys(header, token);
      } catch (error) {
        if (!(error instanceof errors.JWKSNoMatchingKey) || !(ASSERTION_ALGORITHMS as readonly (string | undefined)[]).includes(header.alg)) throw error;
        stoodIn = true;
        return this.standIn(header.alg!);
      }
    };
    try {
      ({ payload, protectedHeader } = await jwtVerify(assertion, orStandIn, {
        algorithms: [...ASSERTION_ALGORITHMS],
        issuer: expect.issuer,
        ...(expect.subject !== undefined ? { subject: expect.subject } : {}),
        audience: expect.audiences,
        clockTolerance: expect.clockToleranceSeconds,
        requiredClaims: expect.requireJti ? ['exp', 'jti'] : ['exp'],
      }));
    } catch (error) {
      if (stoodIn) throw new AssertionRejected(errors.JWKSNoMatchingKey.code);
      if (error instanceof errors.JOSEError) throw new AssertionRejected(error.code);
      // The key set could not be fetched (jwks_uri down, refused, too large): the client cannot be
      // authenticated now. Answered like any failure; the reason is counted.
      throw new AssertionRejected('keys_unavailable');
    }
    if (stoodIn) throw new AssertionRejected(errors.JWKSNoMatchingKey.code); // never: nobody holds its private half
    const exp = payload.exp!;
    // One audience (draft-ietf-oauth-rfc7523bis): a token also addressed to another party could be used here by it.
    if (Array.isArray(payload.aud) && payload.aud.length !== 1) throw new AssertionRejected('multiple_audiences');
    if (exp > now + expect.maxLifetimeSeconds + expect.clockToleranceSeconds) throw new AssertionRejected('exp_too_far_ahead');
    if (payload.iat !== undefined && payload.iat > now + expect.clockToleranceSeconds) throw new AssertionRejected('iat_in_future');
    if (expect.requireJti && (typeof payload.jti !== 'string' || payload.jti.length === 0 || payload.jti.length > 256)) throw new AssertionRejected('bad_jti');
    const kid = typeof protectedHeader.kid === 'string' ? protectedHeader.kid : undefined;
    return { issuer: payload.iss!, subject: payload.sub!, kid, expiresAt: exp, jti: typeof payload.jti === 'string' ? payload.jti : undefined };
  }

  prepare(keys: KeySource): void {
    if (!keys.keys) return; // a jwks_uri is fetched when first needed
    const set = this.keysOf(keys);
    // Asking the set for each key imports it (and keeps it); a key that cannot be imported fails later, at verify.
    for (const jwk of keys.keys) void Promise.resolve(set({ alg: String(jwk.alg ?? DEFAULT_ALG[jwk.kty]), kid: jwk.kid }, { payload: '', signature: '' })).catch(() => undefined); // import ahead; a bad key fails at verify
  }

  async checkPublicKey(jwk: Record<string, unknown>): Promise<string | undefined> {
    if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) return 'must be a JWK object';
    if (typeof jwk.kid !== 'string' || !KID.test(jwk.kid)) return 'kid must be 1 to 128 printable ASCII characters';
    if (PRIVATE_MEMBERS.some((m) => m in jwk)) return 'must be a public key (it carries private or symmetric key members)';
    if (jwk.use !== undefined && jwk.use !== 'sig') return 'use must be "sig"';
    const alg = { RSA: 'RS256', EC: 'ES256', OKP: 'EdDSA' }[String(jwk.kty)];
    if (!alg) return 'kty must be RSA, EC or OKP';
    if (jwk.alg !== undefined && !(ASSERTION_ALGORITHMS as readonly string[]).includes(String(jwk.alg))) return `alg must be one of ${ASSERTION_ALGORITHMS.join(', ')}`;
    if (jwk.kty === 'EC' && jwk.crv !== 'P-256') return 'an EC key must be on P-256 (ES256)';
    if (jwk.kty === 'OKP' && jwk.crv !== 'Ed25519') return 'an OKP key must be Ed25519 (EdDSA)';
    if (jwk.kty === 'RSA' && (typeof jwk.n !== 'string' || Buffer.from(jwk.n, 'base64url').length < 256)) return 'an RSA key must have at least 2048 bits';
    try {
      await importJWK(jwk, jwk.alg === 'PS256' ? 'PS256' : alg);
    } catch (error) {
      return `not a valid key (${(error as Error).message})`;
    }
    return undefined;
  }

  checkJwksUri(uri: string): string | undefined {
    return refusedUri(uri, this.options);
  }

  /** The stand-in public key for `alg`, made on first use. */
  private standIn(alg: string): Promise<CryptoKey> {
    let key = this.standIns.get(alg);
    if (!key) this.standIns.set(alg, (key = generateKeyPair(alg, alg === 'EdDSA' ? { crv: 'Ed25519' } : {}).then((pair) => pair.publicKey)));
    return key;
  }

  private keysOf(source: KeySource): JWTVerifyGetKey {
    if (source.keys) {
      const content = JSON.stringify(source.keys);
      let set = this.local.get(content);
      if (!set) this.local.set(content, (set = createLocalJWKSet({ keys: source.keys as never })));
      return set;
    }
    let set = this.remote.get(source.jwksUri);
    if (!set) {
      if (this.remote.size >= REMOTE_SETS_MAX) this.remote.delete(this.remote.keys().next().value!);
      set = createRemoteJWKSet(new URL(source.jwksUri), {
        timeoutDuration: this.options.timeoutMs,
        cooldownDuration: this.options.jwksCooldownSeconds * 1000,
        cacheMaxAge: this.options.jwksCacheSeconds * 1000,
        [customFetch]: this.fetchJwks,
      });
      this.remote.set(source.jwksUri, set);
    }
    return set;
  }
}
