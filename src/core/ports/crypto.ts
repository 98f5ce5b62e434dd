// The expensive cryptography the rules need, done elsewhere (adapters/crypto runs it in worker threads).

export interface SecretHasher {
  /** An argon2id hash of `secret` with this salt (the salt carries the secret's hint: credentials/secret-hint.ts). */
  hashSecret(secret: string, salt: Uint8Array): Promise<string>;
  /** Index of the hash among `hashes` that `secret` matches, or -1. Every candidate costs one verification. */
  verifySecret(task: { hashes: string[]; secret: string }, signal?: AbortSignal): Promise<number>;
  /** Throws a 503 (with Retry-After) when no verification can be queued now: checked before any other work. */
  refuseIfVerificationsFull(): void;
}

/**
 * The JWS `typ` header of what is signed: an access token, `JWT` (svc-native-jwt) or `at+jwt` (RFC 9068,
 * oauth-at-jwt), or a revocation feed's Security Event Token, `secevent+jwt` (RFC 8417).
 */
export type TokenType = 'JWT' | 'at+jwt' | 'secevent+jwt';

export interface TokenSigner {
  /** An RS256 compact JWS of `payload` (JSON text) under the key `kid`, header `typ` = `typ` (default `JWT`). */
  signToken(kid: string, privateKeyPem: string, payload: string, signal?: AbortSignal, typ?: TokenType): Promise<string>;
}

/** A freshly generated signing key: its kid (RFC 7638 thumbprint), public JWK and encrypted private key. */
export interface GeneratedKey {
  kid: string;
  publicJwk: { kty: 'RSA'; n: string; e: string };
  privateKeyEncrypted: string;
}

/** Signing-key material: generation and the encryption of private keys at rest. */
export interface KeyMaterial {
  generate(): Promise<GeneratedKey>;
  /** The PKCS#8 PEM of a stored key; throws when the key-encryption key cannot open it. */
  decrypt(kid: string, privateKeyEncrypted: string): string;
}
