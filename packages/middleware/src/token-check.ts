// A compact JWS access token taken apart and its claims checked, with the same rules and in the same order
// as jose's jwtVerify (algorithms ['RS256'], issuer, audience, requiredClaims exp/sub/iat, maxTokenAge,
// clockTolerance, no extension in `crit` but b64), so every conformance vector keeps its reason; the
// signature itself is checked by the caller on a key imported once (rs256.ts).

/** A defect of the token, named as describeTokenError's descriptions need it. */
export type TokenDefect =
  | { kind: 'malformed' }
  | { kind: 'crit' }
  | { kind: 'alg' }
  | { kind: 'missing'; claim: string }
  | { kind: 'iss' | 'aud' | 'nbf' | 'expired' | 'future' }
  | { kind: 'invalid'; claim: string };

export interface TakenApart {
  header: Record<string, unknown>;
  /** The payload segment, still encoded: decoded only once the signature holds. */
  payloadSegment: string;
  signingInput: Uint8Array;
  signature: Uint8Array;
  /** A `b64: false` header (unencoded payload): refused after the signature check, as jose does. */
  unencoded: boolean;
}

const strictText = new TextDecoder('utf-8', { fatal: true });
const ascii = new TextEncoder();

/** base64url as jose decodes it where Uint8Array.fromBase64 is missing (atob, url alphabet only). */
function decodeSegment(segment: string): Uint8Array | undefined {
  if (segment.includes('+') || segment.includes('/')) return undefined;
  let binary: string;
  try {
    binary = atob(segment.replace(/-/g, '+').replace(/_/g, '/'));
  } catch {
    return undefined; // not base64: the caller names it malformed
  }
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function parseObject(bytes: Uint8Array | undefined): Record<string, unknown> | undefined {
  if (!bytes) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(strictText.decode(bytes));
  } catch {
    return undefined; // not UTF-8 JSON: malformed
  }
  return isPlainObject(parsed) ? parsed : undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Object.prototype.toString.call(value) !== '[object Object]') return false;
  const prototype = Object.getPrototypeOf(value);
  return prototype === null || Object.getPrototypeOf(prototype) === null;
}

/** The header checks jose makes before it resolves a key. */
export function takeApart(token: string): TakenApart | TokenDefect {
  const parts = token.split('.');
  if (parts.length !== 3) return { kind: 'malformed' };
  const [headerSegment, payloadSegment, signatureSegment] = parts;
  const header = parseObject(decodeSegment(headerSegment));
  if (!header) return { kind: 'malformed' };
  let unencoded = false;
  if (header.crit !== undefined) {
    const crit = header.crit;
    if (!Array.isArray(crit) || crit.length === 0 || crit.some((p) => typeof p !== 'string' || p.length === 0)) return { kind: 'malformed' };
    for (const parameter of crit as string[]) {
      // b64 (RFC 7797) is the only extension jose recognises; none other is implemented here.
      if (parameter !== 'b64') return { kind: 'crit' };
      if (!Object.hasOwn(header, parameter) || header[parameter] === undefined) return { kind: 'malformed' };
    }
    if (crit.includes('b64')) {
      if (typeof header.b64 !== 'boolean') return { kind: 'malformed' };
      unencoded = !header.b64;
    }
  }
  if (typeof header.alg !== 'string' || header.alg === '') return { kind: 'malformed' };
  if (header.alg !== 'RS256') return { kind: 'alg' };
  const signature = decodeSegment(signatureSegment);
  if (!signature) return { kind: 'malformed' };
  return { header, payloadSegment, signingInput: ascii.encode(`${headerSegment}.${payloadSegment}`), signature, unencoded };
}

export interface ClaimRules {
  issuer: string;
  audiences: readonly string[];
  /** Seconds since the epoch, whole (jose floors the clock). */
  now: number;
  clockTolerance: number;
  maxTokenAge: number;
}

/** The payload after a good signature: parsed, then jose's claim checks in jose's order. */
export function checkClaims(payloadSegment: string, rules: ClaimRules): { claims: Record<string, unknown> } | TokenDefect {
  const claims = parseObject(decodeSegment(payloadSegment));
  if (!claims) return { kind: 'malformed' };
  // jose's presence order: issuer, audience, maxTokenAge (iat), then the required claims from the last.
  for (const claim of ['iss', 'aud', 'iat', 'sub', 'exp']) if (!Object.hasOwn(claims, claim)) return { kind: 'missing', claim };
  if (claims.iss !== rules.issuer) return { kind: 'iss' };
  const aud = claims.aud;
  const audienceOk = typeof aud === 'string' ? rules.audiences.includes(aud) : Array.isArray(aud) ? rules.audiences.some((a) => aud.includes(a)) : false;
  if (!audienceOk) return { kind: 'aud' };
  const { now, clockTolerance: tolerance } = rules;
  if (typeof claims.iat !== 'number') return { kind: 'invalid', claim: 'iat' };
  const iat = claims.iat;
  if (claims.nbf !== undefined && (typeof claims.nbf !== 'number' || claims.nbf > now + tolerance)) return { kind: 'nbf' };
  if (typeof claims.exp !== 'number') return { kind: 'invalid', claim: 'exp' };
  if (claims.exp <= now - tolerance) return { kind: 'expired' };
  const age = now - iat;
  if (age - tolerance > rules.maxTokenAge) return { kind: 'expired' };
  if (age < -tolerance) return { kind: 'future' };
  return { claims };
}
