// Strong ETag of a representation's bytes (JWKS, scope files): 32 characters of its SHA-256.
import { createHash } from 'node:crypto';

export function strongEtag(body: Buffer): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 32)}"`;
}
