// The admin token check, observed through its comparer: every candidate (empty, prefix, longer, other
// case, the right one) costs exactly one comparison of two 32-byte values, and gets the right answer.
import { timingSafeEqual } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { adminTokenCheck } from '../../src/adapters/http/admin-auth.js';

const TOKEN = 'correct-horse-battery-staple-0123456789';

describe('adminTokenCheck', () => {
  const candidates: [string, boolean][] = [
    ['', false],
    ['Bearer', false],
    ['Bearer ', false],
    [`Bearer ${TOKEN.slice(0, 1)}`, false],
    [`Bearer ${TOKEN.slice(0, -1)}`, false],
    [`Bearer ${TOKEN}x`, false],
    [`Bearer ${TOKEN}${'x'.repeat(10_000)}`, false],
    [`bearer ${TOKEN}`, false],
    [`BEARER ${TOKEN}`, false],
    [`Bearer ${TOKEN.toUpperCase()}`, false],
    [`Bearer  ${TOKEN}`, false],
    [TOKEN, false],
    [`Basic ${TOKEN}`, false],
    [`Bearer ${TOKEN}`, true],
  ];

  it('compares exactly once, always 32 bytes against the same 32 bytes, whatever the candidate', () => {
    const calls: [Buffer, Buffer][] = [];
    const check = adminTokenCheck(TOKEN, (presented, expected) => {
      calls.push([presented, expected]);
      return timingSafeEqual(presented, expected);
    });
    for (const [candidate, expected] of candidates) {
      const before = calls.length;
      expect(check(candidate), JSON.stringify(candidate.slice(0, 60))).toBe(expected);
      expect(calls.length - before, candidate.slice(0, 60)).toBe(1);
      const [presented, reference] = calls[calls.length - 1];
      expect(presented.length).toBe(32);
      expect(reference.length).toBe(32);
      expect(reference.equals(calls[0][1])).toBe(true);
    }
  });

  it('answers right with the default constant-time comparer', () => {
    const check = adminTokenCheck(TOKEN);
    for (const [candidate, expected] of candidates) expect(check(candidate)).toBe(expected);
  });
});
