// Private signing keys at rest: AES-256-GCM under the key-encryption key (KEY_ENCRYPTION_KEY, or one
// generated into DATA_DIR with mode 0600 when unset).
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const VERSION = 'v1';

export function encryptPrivateKey(kek: Buffer, plaintext: string, kid: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', kek, iv);
  cipher.setAAD(Buffer.from(kid)); // binds the ciphertext to its kid: rows cannot be swapped
  const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return `${VERSION}.${Buffer.concat([iv, cipher.getAuthTag(), data]).toString('base64')}`;
}

export class KeyDecryptionError extends Error {
  constructor(readonly kid: string) {
    super(
      `KEY_ENCRYPTION_KEY cannot decrypt signing key ${kid}: it is not the key these signing keys were encrypted with. ` +
        'Refusing to start (no new signing key is minted). Set the original KEY_ENCRYPTION_KEY.',
    );
    this.name = 'KeyDecryptionError';
  }
}

export function decryptPrivateKey(kek: Buffer, encrypted: string, kid: string): string {
  try {
    const [version, payload] = encrypted.split('.', 2);
    if (version !== VERSION || !payload) throw new Error('unknown format');
    const raw = Buffer.from(payload, 'base64');
    const decipher = createDecipheriv('aes-256-gcm', kek, raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(kid));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  } catch {
    throw new KeyDecryptionError(kid);
  }
}

/** The configured key, else the one in DATA_DIR, else a new one written there (mode 0600). */
export function loadOrCreateKeyEncryptionKey(configured: Buffer | undefined, dataDir: string): { kek: Buffer; generatedPath?: string } {
  if (configured) return { kek: configured };
  const file = path.join(dataDir, 'key-encryption-key');
  if (existsSync(file)) return { kek: Buffer.from(readFileSync(file, 'utf8').trim(), 'hex') };
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  try {
    writeFileSync(file, randomBytes(32).toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
  } catch (error) {
    // Another process of this instance created it first: use theirs.
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return { kek: Buffer.from(readFileSync(file, 'utf8').trim(), 'hex') };
  }
  return { kek: Buffer.from(readFileSync(file, 'utf8').trim(), 'hex'), generatedPath: file };
}

/**
 * A key for another purpose derived from the key-encryption key (HKDF-SHA256): every instance that can
 * decrypt the signing keys derives the same one, and it reveals nothing about the KEK.
 */
export function deriveKey(kek: Buffer, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', kek, Buffer.alloc(0), `agent-credential-exchange ${purpose}`, 32));
}
