// One behavioural suite for the records of used assertion jtis (the ReplayGuard port), run against
// Postgres, PGlite, Redis, the in-process map and the two-record guard the service composes over Postgres and
// Redis (test/integration/store-conformance.test.ts, test/in-process/memory-conformance.test.ts). Each test uses
// ids of its own, so one record serves every test.
import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import type { ReplayGuard } from '../../src/core/ports/assertions.js';

export interface ReplayGuardUnderTest {
  guard: ReplayGuard;
  /** A second instance over the same record (another process), when the record is shared. */
  peer?: ReplayGuard;
  /**
   * A record of one store lets exactly one of concurrent first uses win. Two records asked at once (Postgres and
   * Redis) may refuse them all when each wins a different record: never more than one (the promise), maybe none
   * (the client's own race, answered as a replay).
   */
  concurrentWinners?: 'exactly one' | 'at most one';
}

const id = () => `https://client.example/${randomUUID()}\n${randomUUID()}`;
const inAMinute = () => Date.now() + 60_000;

export function replayGuardConformance(get: () => ReplayGuardUnderTest): void {
  it('accepts an id once, then refuses it until it is forgotten', async () => {
    const { guard } = get();
    const used = id();
    expect(await guard.firstUse(used, inAMinute())).toBe(true);
    expect(await guard.firstUse(used, inAMinute())).toBe(false);
    expect(await guard.firstUse(used, inAMinute())).toBe(false);
    // Another id is its own.
    expect(await guard.firstUse(id(), inAMinute())).toBe(true);
  });

  it('tells ids apart that differ only in the issuer part or in case', async () => {
    const { guard } = get();
    const jti = randomUUID();
    expect(await guard.firstUse(`https://a.example\n${jti}`, inAMinute())).toBe(true);
    expect(await guard.firstUse(`https://b.example\n${jti}`, inAMinute())).toBe(true);
    expect(await guard.firstUse(`https://a.example\n${jti.toUpperCase()}`, inAMinute())).toBe(true);
  });

  it('takes ids of any length and content (digested, never stored as sent)', async () => {
    const { guard } = get();
    const long = `${id()}${'x'.repeat(20_000)}\u0000\u202e'; DROP TABLE used_assertion_jtis; --`;
    expect(await guard.firstUse(long, inAMinute())).toBe(true);
    expect(await guard.firstUse(long, inAMinute())).toBe(false);
  });

  it('of many concurrent first uses of one id, one wins (never more)', async () => {
    const { guard, peer, concurrentWinners = 'exactly one' } = get();
    const used = id();
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => (i % 2 && peer ? peer : guard).firstUse(used, inAMinute())));
    if (concurrentWinners === 'exactly one') expect(answers.filter(Boolean)).toHaveLength(1);
    else expect(answers.filter(Boolean).length).toBeLessThanOrEqual(1);
    // Whatever the race, the id is used now.
    expect(await guard.firstUse(used, inAMinute())).toBe(false);
  });

  it('another instance over the same record refuses what one accepted', async (context) => {
    const { guard, peer } = get();
    if (!peer) context.skip(); // an in-process record has no other instance
    const used = id();
    expect(await guard.firstUse(used, inAMinute())).toBe(true);
    expect(await peer!.firstUse(used, inAMinute())).toBe(false);
  });

  it('forgets an id once its assertion could no longer be accepted, and then accepts it again', async () => {
    const { guard } = get();
    const used = id();
    const soon = Date.now() + 300;
    expect(await guard.firstUse(used, soon)).toBe(true);
    expect(await guard.firstUse(used, soon)).toBe(false);
    // Wait on the condition (the remembered moment passed), not on a fixed sleep.
    while (Date.now() <= soon + 50) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await guard.firstUse(used, inAMinute())).toBe(true);
    expect(await guard.firstUse(used, inAMinute())).toBe(false);
  });
}
