// The middleware's revocation rules alone (packages/middleware/src/revocation-rules.ts): no socket, no
// poll, no signature, a fake clock. Which sequences a head proves purged, when a head proves the copy
// current (every live SET held) and when it shows a gap (a SET dropped in transit), the mixed-version
// policy for heads without `live`, malformed heads, and the tokens the entries and failMode refuse.
import { describe, expect, it } from 'vitest';
import { readStreamHead, RevocationRules, type RevocationRulesOptions, type StreamHead } from '../../packages/middleware/src/revocation-rules.js';
import type { SetPayload } from '../../packages/protocol/src/feed-document.js';

const ISSUER = 'https://ace.test';
const PLATFORM = '11111111-1111-4111-8111-111111111111';
const AGENT = '22222222-2222-4222-8222-222222222222';
const OTHER = '33333333-3333-4333-8333-333333333333';
const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
const PLATFORM_REVOKED = 'urn:agent-credential-exchange:secevent:platform-tokens-revoked';
const KEY_RETIRED = 'urn:agent-credential-exchange:secevent:signing-key-retired';
const T0 = 1_767_225_600; // seconds

function rules(options: Partial<RevocationRulesOptions> = {}) {
  const clock = { ms: T0 * 1000 };
  const r = new RevocationRules({ issuer: ISSUER, clockToleranceSeconds: 0, failMode: 'closed', staleAfterMs: 15_000, openForMs: 300_000, now: () => clock.ms, ...options });
  const seconds = () => Math.floor(clock.ms / 1000);
  return { r, clock, seconds, advance: (ms: number) => void (clock.ms += ms) };
}

const agentRevoked = (agent: string, iatMax: number, expiresAt = iatMax + 900): SetPayload => ({
  iss: ISSUER,
  aud: PLATFORM,
  iat: iatMax,
  jti: 'x',
  sub_id: { format: 'iss_sub', iss: ISSUER, sub: agent },
  events: { [SESSION_REVOKED]: { event_timestamp: iatMax, iat_max: iatMax, expires_at: expiresAt } },
});
const nothing = (): SetPayload => ({ iss: ISSUER, aud: PLATFORM, iat: T0, jti: 'x', sub_id: { format: 'opaque', id: 'x' }, events: { 'urn:example:unknown': { event_timestamp: T0, expires_at: T0 + 900 } } });
const head = (seq: number, live?: [number, number][]): StreamHead => (live === undefined ? { seq } : { seq, live });

describe('stream heads: what they prove', () => {
  it('held SETs advance the sequence only while contiguous, in any order', () => {
    const { r } = rules();
    r.applyRevocation(2, nothing());
    expect(r.seq).toBe(0);
    r.applyRevocation(1, nothing());
    expect(r.seq).toBe(2);
    r.applyRevocation(4, nothing());
    r.applyRevocation(1, nothing()); // a replay changes nothing
    expect(r.seq).toBe(2);
  });

  it('a head with live proves purged what it does not list: the sequence steps over expired SETs and is current', () => {
    const { r, seconds } = rules();
    r.applyRevocation(5, nothing());
    expect(r.applyHead(head(5, [[5, 5]]), seconds())).toBe('current');
    expect(r.seq).toBe(5);
    expect(r.isStale()).toBe(false);
    expect(r.hasGap).toBe(false);
  });

  it('a stripped answer (the head lists a live SET the copy lacks) is a gap: not current, no freshness, stale like a cut feed', () => {
    const { r, seconds, advance } = rules({ failMode: 'closed', staleAfterMs: 5000 });
    expect(r.applyHead(head(0, []), seconds())).toBe('current');
    r.applyRevocation(1, nothing());
    r.applyRevocation(3, agentRevoked(OTHER, seconds()));
    // SET 2 (revoking AGENT) was dropped in transit; the head says 1-3 are live.
    advance(1000);
    expect(r.applyHead(head(3, [[1, 3]]), seconds())).toBe('gap');
    expect(r.seq).toBe(1);
    expect(r.hasGap).toBe(true);
    // Fresh heads keep coming, each showing the gap: none of them refreshes the copy.
    for (let i = 0; i < 5; i++) {
      advance(1000);
      expect(r.applyHead(head(3, [[1, 3]]), seconds())).toBe('gap');
    }
    expect(r.isStale()).toBe(true);
    expect(r.check({ sub: AGENT, iat: seconds() - 10 })).toBe('unavailable');
    // SET 2 arrives: the next head proves the copy current, and the token it revokes is refused.
    r.applyRevocation(2, agentRevoked(AGENT, seconds()));
    expect(r.seq).toBe(3);
    expect(r.applyHead(head(3, [[1, 3]]), seconds())).toBe('current');
    expect(r.check({ sub: AGENT, iat: seconds() - 10 })).toBe('revoked');
    expect(r.check({ sub: OTHER, iat: seconds() + 1 })).toBe('ok');
  });

  it('purged ranges and held SETs interleave: the sequence walks range by range, and on over held SETs above the head', () => {
    const { r, seconds } = rules();
    for (const seq of [3, 4, 8, 9, 10, 11]) r.applyRevocation(seq, nothing());
    expect(r.applyHead(head(10, [[3, 4], [8, 10]]), seconds())).toBe('current');
    expect(r.seq).toBe(11);
  });

  it('a live SET held after a later head that purges it no longer matters; an old head cannot undo a later one', () => {
    const { r, seconds } = rules();
    expect(r.applyHead(head(4, [[2, 4]]), seconds())).toBe('gap');
    expect(r.seq).toBe(1); // 1 purged, 2 live and missing
    // Later, 2 expired too: the next head lists only 3-4, which are held.
    r.applyRevocation(3, nothing());
    r.applyRevocation(4, nothing());
    expect(r.applyHead(head(4, [[3, 4]]), seconds())).toBe('current');
    expect(r.seq).toBe(4);
    expect(r.applyHead(head(4, [[2, 4]]), seconds())).toBe('current'); // replayed older head: we are at 4 already
  });

  it('a head far above with nothing live moves the sequence in one step (no walk over each number)', () => {
    const { r, seconds } = rules();
    expect(r.applyHead(head(Number.MAX_SAFE_INTEGER, []), seconds())).toBe('current');
    expect(r.seq).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('mixed versions: a head without live proves nothing purged, only freshness when every SET up to it is held', () => {
    const { r, seconds } = rules();
    r.applyRevocation(2, nothing());
    expect(r.applyHead(head(2), seconds())).toBe('gap'); // 1 may have expired, or have been dropped: unknowable
    expect(r.seq).toBe(0);
    expect(r.isStale()).toBe(true);
    expect(r.applyHead(head(2, [[2, 2]]), seconds())).toBe('current'); // a head of the new release settles it
    expect(r.seq).toBe(2);
    r.applyRevocation(3, nothing());
    expect(r.applyHead(head(3), seconds())).toBe('current');
  });
});

describe('stream heads: malformed ones are rejected whole', () => {
  const valid: unknown[] = [
    { seq: 0 },
    { seq: 0, live: [] },
    { seq: 5, live: [[1, 5]] },
    { seq: 9, live: [[1, 1], [3, 4], [9, 9]] },
    { seq: Number.MAX_SAFE_INTEGER, live: [[Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER]] },
  ];
  const malformed: unknown[] = [
    null,
    'head',
    {},
    { seq: -1 },
    { seq: 1.5 },
    { seq: '3' },
    { seq: 2 ** 53 },
    { seq: 3, live: null },
    { seq: 3, live: {} },
    { seq: 3, live: [1, 3] },
    { seq: 3, live: [[1]] },
    { seq: 3, live: [[1, 2, 3]] },
    { seq: 3, live: [[0, 2]] },
    { seq: 3, live: [[2, 1]] },
    { seq: 3, live: [[1, 4]] },
    { seq: 3, live: [['1', 2]] },
    { seq: 3, live: [[1, 2.5]] },
    { seq: 9, live: [[1, 3], [3, 5]] }, // overlapping
    { seq: 9, live: [[1, 3], [4, 5]] }, // adjacent: one range
    { seq: 9, live: [[5, 6], [1, 2]] }, // descending
    { seq: 2 ** 54, live: [[1, 2 ** 54]] },
  ];
  for (const body of valid) it(`accepts ${JSON.stringify(body)}`, () => expect(readStreamHead(body)).toBeDefined());
  for (const body of malformed) it(`rejects ${JSON.stringify(body)}`, () => expect(readStreamHead(body)).toBeUndefined());
});

describe('freshness and failMode on a fake clock', () => {
  it('a head proves the copy current as of its iat, never later than now; the copy goes stale past staleAfterMs', () => {
    const { r, seconds, advance } = rules({ staleAfterMs: 15_000 });
    expect(r.isStale()).toBe(true); // never proven current
    r.applyHead(head(0, []), seconds() - 60); // a replayed old head: current as of a minute ago
    expect(r.isStale()).toBe(true);
    r.applyHead(head(0, []), seconds() + 3600); // a service clock ahead proves no more than now
    expect(r.lastContactAt).toBe(T0 * 1000);
    advance(15_000);
    expect(r.isStale()).toBe(false);
    advance(1);
    expect(r.isStale()).toBe(true);
  });

  it('fail closed refuses once stale; fail open accepts and counts until openUntil, then refuses', () => {
    const closed = rules({ failMode: 'closed', staleAfterMs: 1000 });
    const open = rules({ failMode: 'open', staleAfterMs: 1000, openForMs: 5000 });
    for (const { r, seconds } of [closed, open]) r.applyHead(head(0, []), seconds());
    expect(closed.r.check({ sub: AGENT, iat: T0 })).toBe('ok');
    closed.advance(2000);
    open.advance(2000);
    expect(closed.r.check({ sub: AGENT, iat: T0 })).toBe('unavailable');
    expect(open.r.check({ sub: AGENT, iat: T0 })).toBe('ok-while-stale');
    expect(open.r.acceptedWhileStale).toBe(1);
    expect(open.r.openUntil()).toBe(T0 * 1000 + 1000 + 5000);
    open.advance(4001);
    expect(open.r.check({ sub: AGENT, iat: T0 })).toBe('unavailable');
  });
});

describe('entries: which tokens they take back', () => {
  it("an agent's tokens up to iat_max, until expires_at (+ tolerance); a platform's likewise; another issuer's subject is ignored", () => {
    const { r, seconds, advance } = rules({ clockToleranceSeconds: 5, failMode: 'open', openForMs: 10 ** 9 });
    r.applyHead(head(0, []), seconds());
    r.applyRevocation(1, agentRevoked(AGENT, T0, T0 + 60));
    r.applyRevocation(2, { ...agentRevoked(OTHER, T0), sub_id: { format: 'iss_sub', iss: 'https://other.test', sub: OTHER } });
    expect(r.check({ sub: AGENT, iat: T0 })).toBe('revoked');
    expect(r.check({ sub: AGENT, iat: T0 + 1 })).toBe('ok');
    expect(r.check({ sub: OTHER, iat: T0 })).toBe('ok');
    r.applyRevocation(3, { iss: ISSUER, aud: PLATFORM, iat: T0, jti: 'x', sub_id: { format: 'opaque', id: PLATFORM }, events: { [PLATFORM_REVOKED]: { event_timestamp: T0, iat_max: T0 - 10, expires_at: T0 + 30 } } });
    expect(r.check({ sub: OTHER, iat: T0 - 10 })).toBe('revoked');
    expect(r.refused).toBe(2);
    advance(35_001); // past the platform entry's expiry + tolerance
    expect(r.check({ sub: OTHER, iat: T0 - 10 })).toBe('ok-while-stale');
    expect(r.check({ sub: AGENT, iat: T0 })).toBe('revoked'); // the agent entry lives until T0 + 60 (+ 5)
  });

  it('an agent entry holds until its expires_at, then is forgotten', () => {
    const { r, seconds, advance } = rules({ clockToleranceSeconds: 0 });
    r.applyRevocation(1, agentRevoked(AGENT, T0, T0 + 60));
    advance(59_000);
    r.applyHead(head(1, [[1, 1]]), seconds());
    expect(r.check({ sub: AGENT, iat: T0 })).toBe('revoked');
    advance(1_001);
    r.applyHead(head(1, [[1, 1]]), seconds());
    expect(r.check({ sub: AGENT, iat: T0 })).toBe('ok');
    expect(r.liveEntries).toBe(0); // forgotten once expired
  });

  it('a retired key is void until expires_at; asking whether it is void counts nothing, refusing does', () => {
    const { r, advance } = rules();
    r.applyRevocation(1, { iss: ISSUER, aud: PLATFORM, iat: T0, jti: 'x', sub_id: { format: 'opaque', id: 'old' }, events: { [KEY_RETIRED]: { event_timestamp: T0, expires_at: T0 + 10 } } });
    expect(r.isVoidKey('old')).toBe(true);
    expect(r.refused).toBe(0);
    expect(r.refuseVoidKey('old')).toBe(true);
    expect(r.refuseVoidKey('k1')).toBe(false);
    expect(r.refused).toBe(1);
    advance(10_001);
    expect(r.isVoidKey('old')).toBe(false);
  });
});
