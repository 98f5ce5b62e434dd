// The strong ETag of served documents: one format for the JWKS, the scope files and the revocation feed.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { strongEtag } from '../../src/core/support/etag.js';

describe('strongEtag', () => {
  it('is the quoted, 32-character base64url prefix of the SHA-256 of the body', () => {
    const body = Buffer.from('{"keys":[]}');
    expect(strongEtag(body)).toBe(`"${createHash('sha256').update(body).digest('base64url').slice(0, 32)}"`);
    expect(strongEtag(body)).toMatch(/^"[A-Za-z0-9_-]{32}"$/);
    expect(strongEtag(Buffer.alloc(0))).toBe('"47DEQpj8HBSa-_TImW-5JCeuQeRkm5NM"');
  });

  it('hashes a string as its UTF-8 bytes: a string and its Buffer give the same tag', () => {
    const text = 'eyJhbGciOiJSUzI1NiJ9.é✓';
    expect(strongEtag(text)).toBe(strongEtag(Buffer.from(text, 'utf8')));
  });

  it('differs when the body differs', () => {
    expect(strongEtag('a')).not.toBe(strongEtag('b'));
  });
});
