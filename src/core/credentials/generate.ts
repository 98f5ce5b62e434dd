// Identifiers and secrets from the CSPRNG.
import { randomBytes } from 'node:crypto';

/** The deployment prefix followed by 32 lowercase hex characters (128 bits). */
export function generateApiKeyId(prefix: string): string {
  return prefix + randomBytes(16).toString('hex');
}

/** 256 bits, URL-safe text (43 characters). Shown once, stored only as an argon2id hash. */
export function generateSecret(): string {
  return randomBytes(32).toString('base64url');
}
