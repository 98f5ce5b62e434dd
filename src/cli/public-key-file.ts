// A public key file as the admin API wants it: a JWK (JSON, with or without kid; a JWK Set's keys) or a PEM
// public key (SPKI), made a JWK with its RFC 7638 thumbprint as kid when it has none. A private key is
// refused: only its public half belongs in the service.
import { createHash, createPublicKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { UsageError } from './errors.js';

type Jwk = Record<string, unknown> & { kty: string };

const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k'];
/** RFC 7638 §3.2: the required members of each key type, in lexicographic order. */
const THUMBPRINT_MEMBERS: Record<string, string[]> = { RSA: ['e', 'kty', 'n'], EC: ['crv', 'kty', 'x', 'y'], OKP: ['crv', 'kty', 'x'] };

export function thumbprint(jwk: Jwk): string {
  const members = THUMBPRINT_MEMBERS[jwk.kty];
  if (!members) throw new UsageError(`unsupported key type ${JSON.stringify(jwk.kty)} (RSA, EC or OKP)`);
  const canonical = `{${members.map((m) => `${JSON.stringify(m)}:${JSON.stringify(jwk[m])}`).join(',')}}`;
  return createHash('sha256').update(canonical).digest('base64url');
}

/** The public JWKs in `file` (a JWK, a JWK Set or a PEM public key), each with a kid. */
export function readPublicKeys(file: string): Jwk[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read ${file}: ${(error as Error).message}`);
  }
  let keys: Jwk[];
  if (text.includes('-----BEGIN')) {
    if (/PRIVATE KEY-----/.test(text)) throw new UsageError(`${file} holds a private key: give its public key (openssl pkey -pubout)`);
    let jwk: Jwk;
    try {
      jwk = createPublicKey(text).export({ format: 'jwk' }) as Jwk;
    } catch (error) {
      throw new UsageError(`${file} is not a PEM public key: ${(error as Error).message}`);
    }
    keys = [jwk];
  } else {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new UsageError(`${file} is neither a JWK (JSON) nor a PEM public key`);
    }
    const object = parsed as { keys?: unknown };
    keys = (Array.isArray(object.keys) ? object.keys : [parsed]) as Jwk[];
  }
  return keys.map((key) => {
    if (typeof key !== 'object' || key === null || typeof key.kty !== 'string') throw new UsageError(`${file}: a key without kty`);
    if (PRIVATE_MEMBERS.some((m) => m in key)) throw new UsageError(`${file} holds private key material: give the public key only`);
    return { ...key, kid: typeof key.kid === 'string' ? key.kid : thumbprint(key) };
  });
}
