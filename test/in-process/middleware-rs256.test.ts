// The middleware's RS256 keys: imported once per kid and key set (node:crypto KeyObjects on the Node entry,
// WebCrypto keys on the runtime-neutral one), signatures checked on them; keys too short for RS256 refused.
import { generateKeyPairSync, KeyObject } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { exportJWK, SignJWT, type JWK } from 'jose';
import { JwksCache, UnknownKeyError } from '../../packages/middleware/src/jwks-cache.js';
import { nodeRs256 } from '../../packages/middleware/src/node.js';
import { webRs256, type Rs256 } from '../../packages/middleware/src/rs256.js';

const pair = generateKeyPairSync('rsa', { modulusLength: 2048 });
const second = generateKeyPairSync('rsa', { modulusLength: 2048 });
const short = generateKeyPairSync('rsa', { modulusLength: 1024 });
const jwkOf = async (key: KeyObject, kid: string): Promise<JWK> => ({ ...(await exportJWK(key)), kid, alg: 'RS256', use: 'sig' });

/** A JWKS cache over a key set the test replaces, with an Rs256 that counts its imports. */
function cacheWith(rs256: Rs256, keys: () => JWK[]) {
  const imports: string[] = [];
  const counting: Rs256 = {
    importKey: (jwk) => {
      imports.push(jwk.kid!);
      return rs256.importKey(jwk);
    },
    verify: rs256.verify,
  };
  const fetchStub: typeof fetch = async () => Response.json({ keys: keys() }, { headers: { 'cache-control': 'max-age=300' } });
  const cache = new JwksCache({ url: 'https://ace.test/.well-known/jwks.json', fetch: fetchStub, cooldownMs: 0, defaultMaxAgeMs: 300_000, maxMaxAgeMs: 300_000, timeoutMs: 1000, rs256: counting });
  return { cache, imports };
}

const parts = (token: string) => {
  const [h, p, s] = token.split('.');
  return { input: new TextEncoder().encode(`${h}.${p}`), signature: new Uint8Array(Buffer.from(s, 'base64url')) };
};

describe('RS256 keys of the middleware', () => {
  for (const [name, rs256] of [['node:crypto (Node entry)', nodeRs256], ['WebCrypto (edge entry)', webRs256]] as const) {
    it(`${name}: a kid's key is imported once per key set, and checks its signatures`, async () => {
      let keys = [await jwkOf(pair.publicKey, 'k1')];
      const { cache, imports } = cacheWith(rs256, () => keys);
      await cache.prefetch();
      const key = await cache.verificationKey({ kid: 'k1' });
      expect(await cache.verificationKey({ kid: 'k1' })).toBe(key);
      expect(imports).toEqual(['k1']);
      if (rs256 === nodeRs256) expect(key).toBeInstanceOf(KeyObject);

      const token = await new SignJWT({ sub: 'a' }).setProtectedHeader({ alg: 'RS256', kid: 'k1' }).sign(pair.privateKey);
      const { input, signature } = parts(token);
      expect(await rs256.verify(key, input, signature)).toBe(true);
      const tampered = new Uint8Array(input);
      tampered[tampered.length - 1] ^= 1;
      expect(await rs256.verify(key, tampered, signature)).toBe(false);

      // A new key set (a kid now names another key): imported again, the old key is not used for it.
      keys = [await jwkOf(second.publicKey, 'k1')];
      await cache.verificationKey({ kid: 'unknown-kid' }).catch((e) => expect(e).toBeInstanceOf(UnknownKeyError)); // forces the refresh
      const replaced = await cache.verificationKey({ kid: 'k1' });
      expect(replaced).not.toBe(key);
      expect(imports).toEqual(['k1', 'k1']);
      expect(await rs256.verify(replaced, input, signature)).toBe(false);
      cache.close();
    });

    it(`${name}: a key shorter than 2048 bits is no RS256 key (its tokens: unknown key)`, async () => {
      const weak = await jwkOf(short.publicKey, 'weak');
      const { cache } = cacheWith(rs256, () => [weak]);
      await cache.prefetch();
      await expect(cache.verificationKey({ kid: 'weak' })).rejects.toBeInstanceOf(UnknownKeyError);
      cache.close();
    });
  }
});
