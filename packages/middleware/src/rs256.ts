// RS256 (RSASSA-PKCS1-v1_5 with SHA-256) signature checks on keys imported once per kid. The runtime-neutral
// default uses WebCrypto (asynchronous); the Node entry gives node:crypto's KeyObject and crypto.verify,
// synchronous, with no hop to libuv's thread pool (node.ts).
import type { JWK } from 'jose';

export interface Rs256 {
  /** The key of a published JWK, imported once per kid and key set; undefined when it is no usable RS256 key. */
  importKey(jwk: JWK): unknown | Promise<unknown>;
  verify(key: unknown, signingInput: Uint8Array, signature: Uint8Array): boolean | Promise<boolean>;
}

/** Below this modulus length jose refuses RS256 keys; so does this verifier. */
export const MIN_RSA_BITS = 2048;

type SubtleKey = Parameters<typeof crypto.subtle.verify>[1];
type SubtleBytes = Parameters<typeof crypto.subtle.verify>[2];

const ALGORITHM = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' } as const;

export const webRs256: Rs256 = {
  async importKey(jwk) {
    if (typeof jwk.n !== 'string' || typeof jwk.e !== 'string') return undefined;
    const key = await crypto.subtle.importKey('jwk', { kty: 'RSA', n: jwk.n, e: jwk.e, ext: true }, ALGORITHM, false, ['verify']);
    const bits = (key.algorithm as { modulusLength?: number }).modulusLength ?? 0;
    return bits >= MIN_RSA_BITS ? key : undefined;
  },
  verify: (key, signingInput, signature) => crypto.subtle.verify(ALGORITHM, key as SubtleKey, signature as SubtleBytes, signingInput as SubtleBytes),
};
