// Signing-key material for the key manager: RSA-2048 generation on libuv's thread pool (off the event loop),
// the RFC 7638 thumbprint as kid, and the private key encrypted at rest under the key-encryption key.
import { generateKeyPair } from 'node:crypto';
import { promisify } from 'node:util';
import { calculateJwkThumbprint, exportJWK } from 'jose';
import type { GeneratedKey, KeyMaterial } from '../../core/ports/crypto.js';
import { decryptPrivateKey, encryptPrivateKey } from './key-encryption.js';

const generateRsaKeyPair = promisify(generateKeyPair);

export interface RsaKeyMaterialOptions {
  /** The key-encryption key the private keys are kept under. */
  readonly kek: Buffer;
  /** 2048 when absent. */
  readonly modulusLength?: number;
}

export class RsaKeyMaterial implements KeyMaterial {
  private readonly kek: Buffer;
  private readonly modulusLength: number;

  constructor({ kek, modulusLength = 2048 }: RsaKeyMaterialOptions) {
    this.kek = kek;
    this.modulusLength = modulusLength;
  }

  async generate(): Promise<GeneratedKey> {
    const { publicKey, privateKey } = await generateRsaKeyPair('rsa', { modulusLength: this.modulusLength });
    const jwk = await exportJWK(publicKey);
    const publicJwk = { kty: 'RSA' as const, n: jwk.n!, e: jwk.e! };
    const kid = await calculateJwkThumbprint(publicJwk, 'sha256');
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    return { kid, publicJwk, privateKeyEncrypted: encryptPrivateKey(this.kek, pem, kid) };
  }

  decrypt(kid: string, privateKeyEncrypted: string): string {
    return decryptPrivateKey(this.kek, privateKeyEncrypted, kid);
  }
}
