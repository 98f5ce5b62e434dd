// The secret hint decides which stored hash a credential check verifies: one verification per check,
// and the right hash always among those verified.
import { describe, expect, it } from 'vitest';
import { hashSync, verifySync } from '@node-rs/argon2';
import { randomBytes } from 'node:crypto';
import { hashesToVerify, hintedSalt, hintOfHash, secretHint } from '../../src/core/credentials/secret-hint.js';
import type { SecretHashes } from '../../src/core/model.js';

// Cheap parameters: only the salt layout matters here.
const FAST = { memoryCost: 64, timeCost: 1, parallelism: 1 };
const newSecret = () => randomBytes(32).toString('base64url');
const hinted = (secret: string) => hashSync(secret, { ...FAST, salt: hintedSalt(secret) });
const legacy = (secret: string) => hashSync(secret, FAST);
const withHint = (hint: number | null, differentFrom?: number | null): string => {
  for (;;) {
    const s = newSecret();
    if ((hint === null || secretHint(s) === hint) && secretHint(s) !== differentFrom) return s;
  }
};
const agent = (current: string, previous: string | null): SecretHashes => ({
  agentId: 'a',
  current,
  previous,
  previousExpiresAt: previous ? new Date(Date.now() + 60_000) : null,
});

describe('secret hint', () => {
  it('is stored in the salt and read back; a hash from before hints has none', () => {
    const secret = newSecret();
    const hash = hinted(secret);
    expect(verifySync(hash, secret)).toBe(true);
    expect(hintOfHash(hash)).toBe(secretHint(secret));
    expect(hintOfHash(legacy(secret))).toBeNull();
    for (const bad of ['', 'not a hash', '$argon2id$v=19$m=64,t=1,p=1$$', null, undefined]) expect(hintOfHash(bad)).toBeNull();
  });

  it('one secret: always the current hash, right or wrong secret', () => {
    const secret = newSecret();
    const hashes = agent(hinted(secret), null);
    expect(hashesToVerify(secret, hashes)).toEqual([0]);
    expect(hashesToVerify(newSecret(), hashes)).toEqual([0]);
  });

  it('grace period with distinct hints: exactly one hash, the right one for either secret', () => {
    for (let i = 0; i < 20; i++) {
      const old = newSecret();
      const fresh = withHint(null, secretHint(old)); // what a rotation draws
      const hashes = agent(hinted(fresh), hinted(old));
      expect(hashesToVerify(fresh, hashes)).toEqual([0]);
      expect(hashesToVerify(old, hashes)).toEqual([1]);
      const wrong = hashesToVerify(newSecret(), hashes);
      expect(wrong).toHaveLength(1); // a wrong secret costs one verification too
    }
  });

  it('hints that cannot decide: both hashes are verified, so no valid secret is ever refused', () => {
    const old = newSecret();
    const sameHint = withHint(secretHint(old));
    expect(hashesToVerify(old, agent(hinted(sameHint), hinted(old)))).toEqual([0, 1]);
    expect(hashesToVerify(old, agent(legacy(sameHint), legacy(old)))).toEqual([0, 1]);
    // Mixed: a hinted current whose hint is not the secret's rules it out.
    const fresh = withHint(null, secretHint(old));
    expect(hashesToVerify(old, agent(hinted(fresh), legacy(old)))).toEqual([1]);
  });
});
