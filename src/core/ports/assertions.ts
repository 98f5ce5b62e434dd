// Client assertions (RFC 7523 §2.2): a JWT the client signs (private_key_jwt) or its platform issued
// (workload identity), checked by an adapter (adapters/crypto/assertion-verifier.ts, jose) against keys
// the core names; and the single use of each assertion's `jti` across every instance.
import type { KeySource } from './client-keys.js';

/** What an assertion must say, besides a signature by one of `keys`. */
export interface AssertionExpectations {
  keys: KeySource;
  /** Exactly this `iss`. */
  issuer: string;
  /** Exactly this `sub`, when given. */
  subject?: string;
  /** `aud` one of these, and nothing else (a string or a one-element array). */
  audiences: string[];
  /** `exp` no further than this many seconds after now (and after `iat`). */
  maxLifetimeSeconds: number;
  /** Tolerance for `exp`, `iat` and `nbf` against this instance's clock. */
  clockToleranceSeconds: number;
  /** `jti` required (private_key_jwt: single use); a workload token may reuse its jti until it expires. */
  requireJti: boolean;
}

export interface VerifiedAssertion {
  issuer: string;
  subject: string;
  /** The JWS header's `kid`, when it names one (the key that verified it). */
  kid: string | undefined;
  /** Seconds since the epoch. */
  expiresAt: number;
  jti: string | undefined;
}

/**
 * What an assertion claims before it is verified: `iss` and `sub` pick the keys to verify with; with `kid`
 * and `jti` they are what a refusal's audit event says was claimed. Each is there only when it is a string.
 */
export interface ClaimedAssertion {
  issuer?: string;
  subject?: string;
  kid?: string;
  jti?: string;
}

export interface AssertionVerifier {
  /** The unverified claims (ClaimedAssertion), or undefined for anything not a JWT. */
  peek(assertion: string): ClaimedAssertion | undefined;
  /** Throws AssertionRejected (any reason: the caller answers them all alike) or StoreUnavailableError. */
  verify(assertion: string, expect: AssertionExpectations, signal?: AbortSignal): Promise<VerifiedAssertion>;
  /**
   * Makes these keys ready to verify with (imported), in the background: the index calls it when a notice
   * brings an agent's new or changed keys, so that the agent's first token costs a verification only.
   */
  prepare(keys: KeySource): void;
  /** Why this JWK cannot be registered (not a public ES256/RS256/PS256/EdDSA key), or undefined when it can. */
  checkPublicKey(jwk: Record<string, unknown>): Promise<string | undefined>;
  /** Why this jwks_uri cannot be registered (scheme, host), or undefined when it can (nothing is fetched). */
  checkJwksUri(uri: string): string | undefined;
}

/**
 * Why an assertion was refused, for metrics only (never for the client: no oracle). `reason` is one of a
 * fixed set of codes (jose's error codes and ours), so it can label a metric.
 */
export class AssertionRejected extends Error {
  constructor(readonly reason: string) {
    super(`client assertion rejected: ${reason}`);
  }
}

/** Each assertion once: shared through Redis when there is one, in process otherwise. */
export interface ReplayGuard {
  /** true the first time `id` is presented; false when it was seen before `rememberUntilMs` (the last moment the assertion could still be accepted). Throws StoreUnavailableError. */
  firstUse(id: string, rememberUntilMs: number): Promise<boolean>;
}
