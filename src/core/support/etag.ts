// Strong ETag of a representation's bytes (JWKS, scope files, revocation feed documents): 32 characters
// of its SHA-256. A string is hashed as its UTF-8 bytes, i.e. as it goes on the wire.
import { createHash } from 'node:crypto';

export function strongEtag(body: string | Uint8Array): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 32)}"`;
}
