// Lets a credential check verify exactly one argon2id hash even while an agent has two secrets (a
// rotation's grace period), so that no refusal is cheaper than another and a cold login costs one
// verification, not two.
//
// The hint is the first byte of SHA-256(secret), stored as the first byte of a 17-byte argon2 salt (the 16
// random bytes after it keep the salt unique). Secrets are 256 random bits made by the service, so 8 bits
// of their hash in the database tell a reader nothing useful. A rotation draws secrets until the new
// one's hint differs from the current hash's, so the two hashes of a grace period never share a hint and
// any presented secret points at one of them.
//
// Hashes made before hints existed have a 16-byte salt and no hint: a check then verifies the current hash
// only, or both during such an agent's grace period (which ends at most one grace period after upgrading).
import { createHash, randomBytes } from 'node:crypto';
import type { SecretHashes } from '../model.js';

const HINTED_SALT_BYTES = 17;

export function secretHint(secret: string): number {
  return createHash('sha256').update(secret).digest()[0];
}

/** The salt to hash `secret` with: its hint, then 16 random bytes. */
export function hintedSalt(secret: string): Uint8Array {
  const salt = Buffer.allocUnsafe(HINTED_SALT_BYTES);
  salt[0] = secretHint(secret);
  randomBytes(HINTED_SALT_BYTES - 1).copy(salt, 1);
  return salt;
}

/** The hint stored in a PHC string's salt (`$argon2id$v=19$m=…,t=…,p=…$<salt>$<hash>`), or null. */
export function hintOfHash(phc: string | null | undefined): number | null {
  if (!phc) return null;
  const fields = phc.split('$');
  if (fields.length !== 6) return null;
  const salt = Buffer.from(fields[4], 'base64');
  return salt.length === HINTED_SALT_BYTES ? salt[0] : null;
}

/**
 * The hashes to verify for `secret` (indexes into [current, previous]): those whose hint is the secret's
 * or unknown. A secret whose hint matches no hash is wrong, but one hash is still verified so that the
 * refusal costs what any other does. Two only when hints cannot decide (hashes from before hints, or two
 * concurrent rotations that drew the same hint).
 */
export function hashesToVerify(secret: string, hashes: SecretHashes): (0 | 1)[] {
  if (!hashes.previous) return [0];
  const hint = secretHint(secret);
  const possible = ([0, 1] as const).filter((i) => {
    const stored = hintOfHash(i === 0 ? hashes.current : hashes.previous);
    return stored === null || stored === hint;
  });
  return possible.length === 0 ? [0] : possible;
}
