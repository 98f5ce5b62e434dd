// The middleware's revocation feed logic in process (no service): which tokens an entry hits, entry expiry,
// void keys, sequence/iat rules, and fail-open versus fail-closed when the feed goes quiet.
import { describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { JwksCache } from '../../packages/middleware/src/jwks-cache.js';
import { DocumentRejectedError, RevocationFeed, type RevocationFeedOptions } from '../../packages/middleware/src/revocation-feed.js';

const PLATFORM = '11111111-1111-4111-8111-111111111111';
const AGENT = '22222222-2222-4222-8222-222222222222';
const OTHER = '33333333-3333-4333-8333-333333333333';
const ISSUER = 'https://ace.test';
const now = () => Math.floor(Date.now() / 1000);

async function setup(options: RevocationFeedOptions = {}) {
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  const fetchStub: typeof fetch = async () => new Response(JSON.stringify({ keys: [jwk] }), { status: 200, headers: { 'content-type': 'application/json' } });
  const jwks = new JwksCache({ url: 'http://jwks', fetch: fetchStub, cooldownMs: 0, defaultMaxAgeMs: 60_000, maxMaxAgeMs: 60_000, timeoutMs: 1000 });
  const feed = new RevocationFeed(
    { serviceUrl: 'http://unused', platformId: PLATFORM, issuer: ISSUER, jwks, fetch: fetchStub, clockToleranceSeconds: 0 },
    { webSocket: false, warn: () => {}, ...options },
  );
  const sign = (payload: Record<string, unknown>) =>
    new SignJWT({ iss: ISSUER, platform_id: PLATFORM, since: 0, iat: now(), entries: [], ...payload })
      .setProtectedHeader({ alg: 'RS256', kid: 'k1', typ: 'ace-revocations+jwt' })
      .sign(privateKey);
  return { feed, sign };
}

describe('revocation feed (in process)', () => {
  it('an agent entry voids that agent\'s tokens issued at or before iat_max, nothing else', async () => {
    const { feed, sign } = await setup();
    const t = now();
    await feed.applyDocument(await sign({ seq: 1, entries: [{ seq: 1, type: 'agent', agent_id: AGENT, iat_max: t, expires_at: t + 900 }] }));
    expect(feed.check({ sub: AGENT, iat: t })).toBe('revoked');
    expect(feed.check({ sub: AGENT, iat: t - 100 })).toBe('revoked');
    expect(feed.check({ sub: AGENT, iat: t + 1 })).toBe('ok');
    expect(feed.check({ sub: OTHER, iat: t })).toBe('ok');
  });

  it('a platform entry voids every token issued at or before iat_max; an expired entry voids nothing', async () => {
    const { feed, sign } = await setup();
    const t = now();
    await feed.applyDocument(await sign({ seq: 1, entries: [{ seq: 1, type: 'platform', iat_max: t, expires_at: t + 900 }] }));
    expect(feed.check({ sub: OTHER, iat: t })).toBe('revoked');
    expect(feed.check({ sub: OTHER, iat: t + 1 })).toBe('ok');
    const { feed: later, sign: signLater } = await setup();
    await later.applyDocument(await signLater({ seq: 1, entries: [{ seq: 1, type: 'agent', agent_id: AGENT, iat_max: t, expires_at: t - 10 }] }));
    expect(later.check({ sub: AGENT, iat: t })).toBe('ok');
  });

  it('a key entry makes the kid void at once', async () => {
    const { feed, sign } = await setup();
    expect(feed.isVoidKey('old')).toBe(false);
    await feed.applyDocument(await sign({ seq: 1, entries: [{ seq: 1, type: 'key', kid: 'old', expires_at: now() + 900 }] }));
    expect(feed.isVoidKey('old')).toBe(true);
    expect(feed.isVoidKey('k1')).toBe(false);
  });

  it('never steps back: an older sequence or an earlier iat is refused; a gap is not skipped over', async () => {
    const { feed, sign } = await setup();
    await feed.applyDocument(await sign({ seq: 5 }));
    await expect(feed.applyDocument(await sign({ seq: 4 }))).rejects.toBeInstanceOf(DocumentRejectedError);
    await expect(feed.applyDocument(await sign({ seq: 6, iat: now() - 30 }))).rejects.toBeInstanceOf(DocumentRejectedError);
    await expect(feed.applyDocument(await sign({ seq: 6, iat: now() - 3600 }))).rejects.toBeInstanceOf(DocumentRejectedError);
    // A pushed document starting after our sequence: its entries apply, but the resume point stays put.
    const t = now();
    await feed.applyDocument(await sign({ seq: 9, since: 8, entries: [{ seq: 9, type: 'agent', agent_id: AGENT, iat_max: t, expires_at: t + 900 }] }));
    expect(feed.check({ sub: AGENT, iat: t })).toBe('revoked');
    expect(feed.stats().seq).toBe(5);
    await feed.applyDocument(await sign({ seq: 9, since: 5 }));
    expect(feed.stats().seq).toBe(9);
    feed.close();
  });

  it('when the feed is quiet past the bound: fail open counts and accepts, fail closed refuses', async () => {
    const open = await setup({ staleAfterSeconds: 0.05 });
    const closed = await setup({ staleAfterSeconds: 0.05, failMode: 'closed' });
    await open.feed.applyDocument(await open.sign({ seq: 1 }));
    await closed.feed.applyDocument(await closed.sign({ seq: 1 }));
    expect(closed.feed.check({ sub: AGENT, iat: now() })).toBe('ok');
    await new Promise((r) => setTimeout(r, 100));
    expect(open.feed.check({ sub: AGENT, iat: now() })).toBe('ok');
    expect(open.feed.stats()).toMatchObject({ stale: true, acceptedWhileStale: 1 });
    expect(closed.feed.check({ sub: AGENT, iat: now() })).toBe('unavailable');
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
});
