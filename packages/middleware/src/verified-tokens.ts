// Tokens already verified, so a token presented again skips the signature and the claims' parsing. Keyed
// by a SHA-256 of the token (a collision would be a forged token passing: a cryptographic hash only), kept
// until the token's own end of validity, and bounded: past `maxEntries` the oldest entry goes. What can
// change after a token was verified is checked again on every hit by the verifier (the clock, the
// revocation feed's verdict, its void keys, whether the JWKS still publishes the kid), so a cached token is
// never served once revoked, retired or expired.
import type { JWTPayload } from 'jose';

export interface VerifiedToken {
  /** The verified payload, frozen: it is shared by every request that presents the token. */
  readonly payload: Readonly<JWTPayload>;
  readonly kid: string;
  readonly scopes: readonly string[];
  /** The resource named in `aud` beside the platform id, if any. */
  readonly resource: string | undefined;
  /** `exp` and `iat`, seconds since the epoch. */
  readonly exp: number;
  readonly iat: number;
}

/** A SHA-256 of the token, as text: synchronous where the runtime can (node:crypto), else WebCrypto's. */
export type TokenDigest = (token: string) => string | Promise<string>;

export const webTokenDigest: TokenDigest = async (token) => {
  const bytes = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(token)));
  let text = '';
  for (const byte of bytes) text += String.fromCharCode(byte);
  return text;
};

export class VerifiedTokens {
  private readonly entries = new Map<string, VerifiedToken>();

  constructor(private readonly maxEntries: number) {}

  get size(): number {
    return this.entries.size;
  }

  get(key: string): VerifiedToken | undefined {
    return this.entries.get(key);
  }

  set(key: string, token: VerifiedToken): void {
    if (this.maxEntries === 0) return;
    if (!this.entries.has(key) && this.entries.size >= this.maxEntries) {
      // Insertion order: the oldest entry is the first key.
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
    this.entries.set(key, token);
  }

  delete(key: string): void {
    this.entries.delete(key);
  }
}
