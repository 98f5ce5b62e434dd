// The middleware's revocation receiver in process (no service; the JWKS and poll answers are served by a
// fetch stand-in, sockets by stand-ins): which tokens a SET hits, void keys, rejected SETs, the signed head as
// the only proof of freshness (gap -> poll at once, spaced), the staleness bounds, the unknown-kid fetch of
// key retirement, and a transport that cannot hang: polls while an upgrade hangs or a socket is silent, an
// unanswered upgrade abandoned and counted. The rules alone, on a fake clock: revocation-rules.test.ts.
import { describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { JwksCache } from '../../packages/middleware/src/jwks-cache.js';
import { DocumentRejectedError, RevocationReceiver, type RevocationFeedOptions } from '../../packages/middleware/src/revocation-feed.js';

const PLATFORM = '11111111-1111-4111-8111-111111111111';
const AGENT = '22222222-2222-4222-8222-222222222222';
const OTHER = '33333333-3333-4333-8333-333333333333';
const ISSUER = 'https://ace.test';
const now = () => Math.floor(Date.now() / 1000);

const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
const PLATFORM_REVOKED = 'urn:agent-credential-exchange:secevent:platform-tokens-revoked';
const KEY_RETIRED = 'urn:agent-credential-exchange:secevent:signing-key-retired';
const HEAD = 'urn:agent-credential-exchange:secevent:stream-head';

type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;
/** Two RSA key pairs for the whole file: generating them per test costs seconds on a busy machine. */
let keyPairs: Promise<[KeyPair, KeyPair]> | undefined;
const sharedKeyPairs = () => (keyPairs ??= Promise.all([generateKeyPair('RS256'), generateKeyPair('RS256')]));

async function setup(options: RevocationFeedOptions = {}, jwksCooldownMs = 0) {
  const [{ privateKey, publicKey }, second] = await sharedKeyPairs();
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  const jwk2 = { ...(await exportJWK(second.publicKey)), kid: 'k2', alg: 'RS256', use: 'sig' };
  const published = [jwk];
  const calls: { url: string; body?: string }[] = [];
  // Stands in for the service's HTTP answers: the JWKS, and an empty poll answer (the poll is only recorded).
  const fetchStub: typeof fetch = async (input, init) => {
    calls.push({ url: String(input), body: init?.body as string | undefined });
    if (String(input).includes('jwks')) return new Response(JSON.stringify({ keys: published }), { status: 200, headers: { 'content-type': 'application/json' } });
    return new Response(JSON.stringify({ sets: {} }), { status: 200, headers: { 'content-type': 'application/json' } });
  };
  const jwks = new JwksCache({ url: 'http://jwks', fetch: fetchStub, cooldownMs: jwksCooldownMs, defaultMaxAgeMs: 60_000, maxMaxAgeMs: 60_000, timeoutMs: 1000 });
  const feed = new RevocationReceiver(
    { serviceUrl: 'http://service', platformId: PLATFORM, issuer: ISSUER, feedToken: 'acef_test', jwks, fetch: fetchStub, clockToleranceSeconds: 0 },
    { webSocket: false, warn: () => {}, ...options },
  );
  const sign = (payload: Record<string, unknown>, header: Record<string, unknown> = {}, key = privateKey) =>
    new SignJWT({ iss: ISSUER, aud: PLATFORM, iat: now(), ...payload })
      .setProtectedHeader({ alg: 'RS256', kid: 'k1', typ: 'secevent+jwt', ...header })
      .sign(key);
  const agentSet = (seq: number, agent: string, iatMax: number, expiresAt = now() + 900) =>
    sign({ jti: `${PLATFORM}:${seq}`, sub_id: { format: 'iss_sub', iss: ISSUER, sub: agent }, events: { [SESSION_REVOKED]: { event_timestamp: now(), iat_max: iatMax, expires_at: expiresAt } } });
  const head = (seq: number, iat = now(), live?: [number, number][]) =>
    sign({ iat, jti: `${PLATFORM}:head`, sub_id: { format: 'opaque', id: PLATFORM }, events: { [HEAD]: live === undefined ? { seq } : { seq, live } } });
  const polls = () => calls.filter((c) => c.url.endsWith('/revocations'));
  return { feed, sign, agentSet, head, polls, calls, publishK2: () => published.push(jwk2), k2: second.privateKey };
}

describe('revocation feed (in process)', () => {
  it("a session-revoked SET voids that agent's tokens issued at or before iat_max, nothing else", async () => {
    const { feed, agentSet } = await setup();
    const t = now();
    await feed.applySet(await agentSet(1, AGENT, t));
    expect(feed.check({ sub: AGENT, iat: t })).toBe('revoked');
    expect(feed.check({ sub: AGENT, iat: t + 1 })).toBe('ok');
    expect(feed.check({ sub: OTHER, iat: t })).toBe('ok');
    expect(feed.stats().seq).toBe(1);
    feed.close();
  });

  it('a platform SET voids every token issued until iat_max; an expired event is forgotten', async () => {
    const { feed, sign, agentSet } = await setup();
    const t = now();
    await feed.applySet(await sign({ jti: `${PLATFORM}:1`, sub_id: { format: 'opaque', id: PLATFORM }, events: { [PLATFORM_REVOKED]: { event_timestamp: t, iat_max: t, expires_at: t + 900 } } }));
    expect(feed.check({ sub: OTHER, iat: t })).toBe('revoked');
    await feed.applySet(await agentSet(2, AGENT, t + 100, t - 10));
    expect(feed.check({ sub: AGENT, iat: t + 50 })).toBe('ok'); // the agent event has expired: forgotten
    expect(feed.check({ sub: AGENT, iat: t })).toBe('revoked'); // the platform event still holds
    feed.close();
  });

  it('a key SET makes its kid void', async () => {
    const { feed, sign } = await setup();
    await feed.applySet(await sign({ jti: `${PLATFORM}:1`, sub_id: { format: 'opaque', id: 'old' }, events: { [KEY_RETIRED]: { event_timestamp: now(), expires_at: now() + 900 } } }));
    expect(feed.isVoidKey('old')).toBe(true);
    expect(feed.isVoidKey('k1')).toBe(false);
    feed.close();
  });

  it('rejects SETs for another platform or issuer, with another typ, or forged', async () => {
    const { feed, sign, agentSet } = await setup();
    const t = now();
    const event = { jti: `${PLATFORM}:1`, sub_id: { format: 'iss_sub', iss: ISSUER, sub: AGENT }, events: { [SESSION_REVOKED]: { event_timestamp: t, iat_max: t, expires_at: t + 900 } } };
    await expect(feed.applySet(await sign({ ...event, aud: OTHER }))).rejects.toBeInstanceOf(DocumentRejectedError);
    await expect(feed.applySet(await sign({ ...event, iss: 'https://evil.test' }))).rejects.toBeInstanceOf(DocumentRejectedError);
    await expect(feed.applySet(await sign(event, { typ: 'JWT' }))).rejects.toBeInstanceOf(DocumentRejectedError);
    const { privateKey: forger } = await generateKeyPair('RS256');
    await expect(feed.applySet(await agentSet(1, AGENT, t).then(() => sign(event, {}, forger)))).rejects.toBeInstanceOf(DocumentRejectedError);
    expect(feed.check({ sub: AGENT, iat: t })).toBe('ok');
    expect(feed.stats().documentsRejected).toBe(4);
    feed.close();
  });

  it('(a) a signed head above our sequence triggers a poll at once, acknowledging our sequence', async () => {
    const { feed, agentSet, head, polls } = await setup();
    await feed.applySet(await agentSet(1, AGENT, now()));
    expect(polls()).toHaveLength(0);
    await feed.applySet(await head(3));
    for (let i = 0; i < 100 && polls().length === 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(polls()).toHaveLength(1);
    expect(JSON.parse(polls()[0].body!)).toMatchObject({ ack: [`${PLATFORM}:1`] });
    feed.close();
  });

  it('(a/b) only a signed head we are in sync with proves freshness: a gap, a replayed old head or no head at all go stale', async () => {
    const { feed, agentSet, head } = await setup({ staleAfterSeconds: 5, failMode: 'closed' });
    expect(feed.check({ sub: OTHER, iat: now() })).toBe('unavailable'); // never synchronised
    await feed.applySet(await agentSet(1, AGENT, now()));
    expect(feed.check({ sub: OTHER, iat: now() })).toBe('unavailable'); // SETs alone prove nothing current
    await feed.applySet(await head(5)); // a gap (SETs 2-5 dropped): not fresh
    expect(feed.check({ sub: OTHER, iat: now() })).toBe('unavailable');
    await feed.applySet(await head(1, now() - 60)); // in sync, but signed a minute ago (a replay)
    expect(feed.check({ sub: OTHER, iat: now() })).toBe('unavailable');
    await feed.applySet(await head(1));
    expect(feed.check({ sub: OTHER, iat: now() })).toBe('ok');
    feed.close();
  });

  it('(b) past the bound: fail closed refuses; fail open accepts and counts, but only for openForAtMostSeconds', async () => {
    const open = await setup({ staleAfterSeconds: 0.05, openForAtMostSeconds: 0.2 });
    const closed = await setup({ staleAfterSeconds: 0.05, failMode: 'closed' });
    await open.feed.applySet(await open.head(0));
    await closed.feed.applySet(await closed.head(0));
    expect(closed.feed.check({ sub: AGENT, iat: now() })).toBe('ok');
    // Freshness counts from the head's signing second (+1 s of granularity), so wait past both.
    for (let i = 0; i < 300 && !closed.feed.stats().stale; i++) await new Promise((r) => setTimeout(r, 10));
    expect(closed.feed.check({ sub: AGENT, iat: now() })).toBe('unavailable');
    expect(open.feed.check({ sub: AGENT, iat: now() })).toBe('ok');
    expect(open.feed.stats()).toMatchObject({ stale: true, acceptedWhileStale: 1 });
    for (let i = 0; i < 300 && open.feed.check({ sub: AGENT, iat: now() }) === 'ok'; i++) await new Promise((r) => setTimeout(r, 10));
    expect(open.feed.check({ sub: AGENT, iat: now() })).toBe('unavailable');
    open.feed.close();
    closed.feed.close();
  });

  it('6: a feed SET signed with a kid the JWKS cache does not know yet fetches the JWKS at once, despite the cooldown', async () => {
    const { feed, sign, head, calls, publishK2, k2 } = await setup({}, 60_000);
    await feed.applySet(await head(0)); // JWKS fetched (k1 only); the 60 s cooldown starts
    publishK2(); // the service rotates
    await new Promise((r) => setTimeout(r, 250));
    const started = Date.now();
    const t = now();
    await feed.applySet(await sign({ jti: `${PLATFORM}:1`, sub_id: { format: 'opaque', id: 'k1' }, events: { [KEY_RETIRED]: { event_timestamp: t, expires_at: t + 900 } } }, { kid: 'k2' }, k2));
    expect(Date.now() - started).toBeLessThan(1000);
    expect(feed.isVoidKey('k1')).toBe(true);
    expect(calls.filter((c) => c.url === 'http://jwks')).toHaveLength(2);
    feed.close();
  });
});

/** A WebSocket stand-in: opens only when told (`open()`), or never (an upgrade a proxy swallows). */
function fakeSockets() {
  const made: FakeSocket[] = [];
  class FakeSocket {
    onopen: ((event: unknown) => void) | null = null;
    onmessage: ((event: { data: unknown }) => void) | null = null;
    onclose: ((event: unknown) => void) | null = null;
    onerror: ((event: unknown) => void) | null = null;
    closed = false;
    constructor(readonly url: string) {
      made.push(this);
    }
    open() {
      this.onopen?.({});
    }
    close() {
      this.closed = true;
    }
  }
  return { made, FakeSocket };
}

async function until(what: string, probe: () => boolean) {
  for (let i = 0; i < 1000 && !probe(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(probe(), what).toBe(true);
}

describe('revocation feed transport: nothing can make it hang', () => {
  it('an upgrade never answered: abandoned after the handshake timeout, counted as a drop, and polled meanwhile', async () => {
    const { made, FakeSocket } = fakeSockets();
    const { feed, polls } = await setup({ webSocket: FakeSocket as never, handshakeTimeoutSeconds: 0.05, pollIntervalSeconds: 0.02, reconnectBaseSeconds: 0.01, reconnectMaxSeconds: 0.02 });
    await feed.start();
    await until('two sockets abandoned', () => feed.stats().socketDrops >= 2);
    await until('polls while no socket is open', () => polls().length >= 4);
    expect(feed.stats()).toMatchObject({ connected: false, lastSocketDrop: 'handshake timeout' });
    expect(made[0].closed).toBe(true);
    feed.close();
  });

  it('while an upgrade hangs (long before its timeout), the feed is polled every period', async () => {
    const { made, FakeSocket } = fakeSockets();
    const { feed, polls } = await setup({ webSocket: FakeSocket as never, handshakeTimeoutSeconds: 600, pollIntervalSeconds: 0.02 });
    await feed.start();
    await until('a socket connecting', () => made.length === 1);
    const before = polls().length;
    await until('polls while the socket connects', () => polls().length >= before + 3);
    expect(made).toHaveLength(1);
    expect(feed.stats()).toMatchObject({ connected: false, socketDrops: 0 });
    feed.close();
  });

  it('an open socket that brings nothing (or no head that proves the copy current) does not stop the polls', async () => {
    const { made, FakeSocket } = fakeSockets();
    const { feed, polls } = await setup({ webSocket: FakeSocket as never, pollIntervalSeconds: 0.02 });
    await feed.start();
    await until('a socket', () => made.length === 1);
    made[0].open();
    expect(feed.stats().connected).toBe(true);
    const before = polls().length;
    await until('polls while the open socket is silent', () => polls().length >= before + 3);
    feed.close();
  });

  it('an open socket that proves the copy current with every head stops the polls', async () => {
    const { made, FakeSocket } = fakeSockets();
    const { feed, polls, head } = await setup({ webSocket: FakeSocket as never, pollIntervalSeconds: 0.05 });
    await feed.start();
    await until('a socket', () => made.length === 1);
    made[0].open();
    // Heads as often as the service would send them, relative to the poll period.
    const heads = setInterval(async () => made[0].onmessage?.({ data: await head(0) }), 20);
    try {
      await until('a head applied', () => feed.stats().lastContactAt > 0);
      const before = polls().length;
      await new Promise((r) => setTimeout(r, 300)); // several poll periods: the timer skips its turns
      expect(polls().length).toBeLessThanOrEqual(before + 1);
    } finally {
      clearInterval(heads);
      feed.close();
    }
  });

  it('heads that keep showing a gap (a proxy stripping SETs) make it poll at once, but never spin', async () => {
    const { feed, head, polls } = await setup({ pollIntervalSeconds: 60 });
    for (let i = 0; i < 30; i++) await feed.applySet(await head(3, undefined, [[1, 3]]));
    await until('the first gap poll', () => polls().length >= 1);
    expect(polls().length).toBeLessThanOrEqual(2);
    expect(feed.stats()).toMatchObject({ seq: 0, gap: true, stale: true });
    feed.close();
  });
});

describe('revocation feed socket', () => {
  it('reconnects after a connection that fails with only an error event (Node 22 WebSocket)', async () => {
    const attempts: string[] = [];
    // A WebSocket whose connection fails the way undici's does: `error`, and no `close`.
    class FailingSocket {
      onopen: ((event: unknown) => void) | null = null;
      onmessage: ((event: { data: unknown }) => void) | null = null;
      onclose: ((event: unknown) => void) | null = null;
      onerror: ((event: unknown) => void) | null = null;
      constructor(url: string) {
        attempts.push(url);
        setTimeout(() => this.onerror?.({}), 1);
      }
      close() {}
    }
    const { feed } = await setup({ webSocket: FailingSocket as never, reconnectBaseSeconds: 0.01, reconnectMaxSeconds: 0.02 });
    await feed.start().catch(() => {});
    for (let i = 0; i < 500 && attempts.length < 3; i++) await new Promise((r) => setTimeout(r, 10));
    feed.close();
    expect(attempts.length).toBeGreaterThanOrEqual(3);
  });

  it('a background poll that fails is counted in stats() with its message, and cleared by the next success', async () => {
    let failing = true;
    const fetchStub: typeof fetch = async (input) => {
      if (String(input).includes('jwks')) return new Response(JSON.stringify({ keys: [] }), { status: 200, headers: { 'content-type': 'application/json' } });
      if (failing) return new Response('{}', { status: 502 });
      return new Response(JSON.stringify({ sets: {} }), { status: 200, headers: { 'content-type': 'application/json' } });
    };
    const jwks = new JwksCache({ url: 'http://jwks', fetch: fetchStub, cooldownMs: 0, defaultMaxAgeMs: 60_000, maxMaxAgeMs: 60_000, timeoutMs: 1000 });
    const feed = new RevocationReceiver(
      { serviceUrl: 'http://service', platformId: PLATFORM, issuer: ISSUER, feedToken: 'acef_test', jwks, fetch: fetchStub, clockToleranceSeconds: 0 },
      { webSocket: false, warn: () => {}, pollIntervalSeconds: 0.02 },
    );
    await expect(feed.start()).rejects.toThrow(/502/); // the first synchronisation's failure reaches its caller
    for (let i = 0; i < 500 && feed.stats().pollFailures < 2; i++) await new Promise((r) => setTimeout(r, 10));
    expect(feed.stats().pollFailures).toBeGreaterThanOrEqual(2);
    expect(feed.stats().lastPollError).toMatch(/HTTP 502/);
    failing = false;
    for (let i = 0; i < 500 && feed.stats().lastPollError !== undefined; i++) await new Promise((r) => setTimeout(r, 10));
    feed.close();
    expect(feed.stats().lastPollError).toBeUndefined();
  });
});
