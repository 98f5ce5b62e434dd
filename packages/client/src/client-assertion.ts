// Credentials of agents without secrets (RFC 7523 §2.2 client assertions): a JWT signed with the agent's
// private key (private_key_jwt), made fresh for every token request (its jti is single use), or the token
// the workload's platform mounted (a Kubernetes projected service-account token, a SPIFFE JWT-SVID), read
// again from its file at every request since the platform rotates it.
import { createPrivateKey, createPublicKey, randomUUID, type JsonWebKey, type KeyObject } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { calculateJwkThumbprint, SignJWT, type JWK } from 'jose';

export type AssertionAlgorithm = 'ES256' | 'RS256' | 'PS256' | 'EdDSA';

/** Makes the client assertion of one token request, addressed to `audience` (the token endpoint). */
export type AssertionSource = (audience: string) => Promise<string>;

/** How long a private_key_jwt assertion is valid: long enough for one request, well under the service's bound. */
const ASSERTION_LIFETIME_SECONDS = 60;

function keyObject(key: KeyObject | string | JsonWebKey): KeyObject {
  if (typeof key === 'string') return createPrivateKey(key);
  if ('type' in key && (key as KeyObject).type === 'private') return key as KeyObject;
  return createPrivateKey({ key: key as JsonWebKey, format: 'jwk' });
}

function defaultAlgorithm(key: KeyObject): AssertionAlgorithm {
  switch (key.asymmetricKeyType) {
    case 'ec':
      return 'ES256';
    case 'ed25519':
      return 'EdDSA';
    case 'rsa':
    case 'rsa-pss':
      return 'RS256';
    default:
      throw new TypeError(`AgentClient: privateKey of type ${key.asymmetricKeyType} is not usable (EC P-256, RSA or Ed25519)`);
  }
}

/**
 * private_key_jwt: `iss` = `sub` = the api_key_id, a one-minute life, a fresh jti. `keyId` defaults to the
 * RFC 7638 thumbprint of the public key (what `ace agent create --key` registers when the key has no kid).
 */
export function privateKeyAssertions(options: { apiKeyId: string; privateKey: KeyObject | string | JsonWebKey; keyId?: string; algorithm?: AssertionAlgorithm }): AssertionSource {
  const key = keyObject(options.privateKey);
  const alg = options.algorithm ?? defaultAlgorithm(key);
  const kid = options.keyId !== undefined ? Promise.resolve(options.keyId) : calculateJwkThumbprint(createPublicKey(key).export({ format: 'jwk' }) as JWK);
  return async (audience) =>
    new SignJWT({ jti: randomUUID() })
      .setProtectedHeader({ alg, kid: await kid, typ: 'JWT' })
      .setIssuer(options.apiKeyId)
      .setSubject(options.apiKeyId)
      .setAudience(audience)
      .setIssuedAt()
      .setExpirationTime(`${ASSERTION_LIFETIME_SECONDS}s`)
      .sign(key);
}

/** A private key file (PEM, or a JWK with its private members), read once. */
export function readPrivateKeyFile(file: string): KeyObject {
  const text = readFileSync(file, 'utf8');
  return text.includes('-----BEGIN') ? createPrivateKey(text) : createPrivateKey({ key: JSON.parse(text) as JsonWebKey, format: 'jwk' });
}

/** The workload's token, read again at every request (Kubernetes rotates projected tokens in place). */
export function workloadTokenAssertions(file: string): AssertionSource {
  return async () => {
    const token = (await readFile(file, 'utf8')).trim();
    if (token === '') throw new Error(`the workload token file ${file} is empty`);
    return token;
  };
}
