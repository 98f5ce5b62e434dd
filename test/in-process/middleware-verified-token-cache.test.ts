// The middleware's verified-token cache, in process (a fetch stand-in serves the JWKS and the revocation
// feed's polls; the verifier reads an injected clock): a token presented again is not verified again, yet
// it is refused at once when a revocation reaches the feed after it was cached, when its key leaves the
// JWKS, and once its exp has passed; and the cache holds no more than its bound.
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import { createVerifier, type AuthorizeResult, type Verifier } from '../../packages/middleware/src/index.js';

const PLATFORM = '8d7b4f2e-3c1a-4e5b-9f60-1a2b3c4d5e6f';
const SERVICE = 'https://ace.example.test';
const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
const HEAD = 'urn:agent-credential-exchange:secevent:stream-head';

type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;
let k1: KeyPair;
let other: KeyPair;
let jwk1: JWK;
let jwk1Swapped: JWK;

beforeAll(async () => {
  [k1, other] = await Promise.all([generateKeyPair('RS256'), generateKeyPair('RS256')]);
  jwk1 = { ...(await exportJWK(k1.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  // Another key under the same kid: a token of k1 verified afresh against it fails its signature, so a
  // token still accepted after the swap was answered from the cache.
  jwk1Swapped = { ...(await exportJWK(other.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
});

const open: Verifier[] = [];
afterEach(() => {
  for (const v of open.splice(0)) v.close();
});

/** A verifier on an injected clock, with a JWKS and poll answers the test changes as it goes. */
function rig(options: { feed?: boolean; cacheSize?: number } = {}) {
  let clock = Date.now();
  const state = { keys: [jwk1] as JWK[], pollAnswers: [] as Record<string, string>[], setKey: k1.privateKey };
  const fetchStub: typeof fetch = async (input) => {
    const url = String(input);
    if (url.endsWith('/.well-known/jwks.json')) return Response.json({ keys: state.keys }, { headers: { 'cache-control': 'max-age=0' } });
    if (url.endsWith('/revocations')) return Response.json({ sets: state.pollAnswers[0] ?? {} });
    return new Response('not found', { status: 404 });
  };
  const verifier = createVerifier({
    serviceUrl: SERVICE,
    scopesDocument: { schema: 'SvcScopesYaml', version: 1, platform_id: PLATFORM, scopes: [{ name: 'orders:read', description: 'read' }], routes: [{ method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] }] },
    fetch: fetchStub,
    now: () => clock,
    jwksCooldownSeconds: 0,
    ...(options.cacheSize === undefined ? {} : { verifiedTokenCacheSize: options.cacheSize }),
    ...(options.feed ? { feedToken: 'acef_test', revocationFeed: { webSocket: false, pollIntervalSeconds: 0.02, warn: () => {} } } : { revocationFeed: false as const }),
  });
  open.push(verifier);
  const seconds = () => Math.floor(clock / 1000);
  const token = (sub = 'agent-1', ttl = 900) =>
    new SignJWT({ scope: 'orders:read', svc_token_profile: 'svc-native-jwt', client_id: 'ak_1', jti: `j-${sub}-${ttl}` })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid: 'k1' })
      .setIssuer(SERVICE)
      .setAudience(PLATFORM)
      .setSubject(sub)
      .setIssuedAt(seconds())
      .setExpirationTime(seconds() + ttl)
      .sign(k1.privateKey);
  const set = (payload: Record<string, unknown>) =>
    new SignJWT({ iss: SERVICE, aud: PLATFORM, iat: seconds(), ...payload }).setProtectedHeader({ alg: 'RS256', kid: 'k1', typ: 'secevent+jwt' }).sign(state.setKey);
  const head = (seq: number, live: [number, number][]) => set({ jti: `${PLATFORM}:head`, sub_id: { format: 'opaque', id: PLATFORM }, events: { [HEAD]: { seq, live } } });
  const authorize = (bearer: string): Promise<AuthorizeResult> => verifier.authorize({ method: 'GET', path: '/orders/1', authorization: `Bearer ${bearer}` });
  /** Publishes another key under k1 and lets the verifier fetch it: from now on only cached tokens of k1 pass. */
  const swapKey = async () => {
    state.keys = [jwk1Swapped];
    state.setKey = other.privateKey; // the feed's SETs are checked against the key now published
    await verifier.ready();
  };
  return { verifier, state, token, set, head, authorize, swapKey, advance: (ms: number) => (clock += ms), seconds };
}

const detail = (result: AuthorizeResult) => (result.ok ? 'ok' : `${result.status} ${JSON.parse(result.body).detail}`);

describe('verified-token cache', () => {
  it('a token presented again is answered from the cache, not verified again (its key was swapped meanwhile)', async () => {
    const r = rig();
    const [cached, fresh] = [await r.token('agent-1'), await r.token('agent-2')];
    expect(detail(await r.authorize(cached))).toBe('ok');
    await r.swapKey();
    // The fresh one is checked against the key now published: its signature fails; the cached one passes.
    expect(detail(await r.authorize(fresh))).toBe('401 The access token signature is invalid.');
    const again = await r.authorize(cached);
    expect(detail(again)).toBe('ok');
    // Each request gets its own claims, the shared payload is frozen (a handler cannot change what the next one sees).
    if (!again.ok) return;
    expect(again.claims).toMatchObject({ agentId: 'agent-1', clientId: 'ak_1', scopes: ['orders:read'], token: cached });
    again.claims.scopes.push('orders:write');
    expect(Object.isFrozen(again.claims.payload)).toBe(true);
    const third = await r.authorize(cached);
    expect(third.ok && third.claims.scopes).toEqual(['orders:read']);
  });

  it('a cached token in another header shape gets the verdict of the full parse', async () => {
    const r = rig();
    const t = await r.token();
    expect(detail(await r.authorize(t))).toBe('ok');
    const as = (authorization: string) => r.verifier.authorize({ method: 'GET', path: '/orders/1', authorization });
    expect(detail(await as(`bearer ${t}`))).toBe('ok');
    expect(detail(await as(`Bearer ${t} extra`))).toBe('400 Malformed Bearer credentials.');
    expect(detail(await as(`Basic ${t}`))).toMatch(/^401 /);
    expect((await as(`Bearer ${t}`)).ok).toBe(true);
  });

  it('(a) a revocation that reaches the feed after the token was cached refuses it at once', async () => {
    const r = rig({ feed: true });
    r.state.pollAnswers = [{ [`${PLATFORM}:head`]: await r.head(0, []) }];
    await r.verifier.ready();
    const [revoked, untouched] = [await r.token('agent-1'), await r.token('agent-2')];
    expect(detail(await r.authorize(revoked))).toBe('ok');
    expect(detail(await r.authorize(untouched))).toBe('ok');
    await r.swapKey(); // so that a pass below can only come from the cache
    const revocation = await r.set({ jti: `${PLATFORM}:1`, sub_id: { format: 'iss_sub', iss: SERVICE, sub: 'agent-1' }, events: { [SESSION_REVOKED]: { event_timestamp: r.seconds(), iat_max: r.seconds(), expires_at: r.seconds() + 900 } } });
    r.state.pollAnswers = [{ [`${PLATFORM}:1`]: revocation, [`${PLATFORM}:head`]: await r.head(1, [[1, 1]]) }];
    await vi.waitFor(() => expect(r.verifier.revocationStats()?.seq).toBe(1), { timeout: 10_000, interval: 10 });
    expect(detail(await r.authorize(revoked))).toBe('401 The access token was revoked.');
    expect(detail(await r.authorize(untouched))).toBe('ok');
    // And it stays refused (dropped from the cache, then refused afresh).
    expect(detail(await r.authorize(revoked))).toMatch(/^401 /);
  });

  it('(b) a token whose key was retired from the JWKS after it was cached is refused at once', async () => {
    const r = rig();
    const cached = await r.token();
    expect(detail(await r.authorize(cached))).toBe('ok');
    r.state.keys = [jwk1Swapped].map((k) => ({ ...k, kid: 'k2' })); // k1 retired, k2 its successor
    await r.verifier.ready();
    expect(detail(await r.authorize(cached))).toBe('401 The access token is signed with an unknown key.');
  });

  it('(c) a cached token is refused once the clock passes its exp (plus the tolerance), not a request later', async () => {
    const r = rig();
    const cached = await r.token('agent-1', 60);
    expect(detail(await r.authorize(cached))).toBe('ok');
    await r.swapKey();
    r.advance(60_000 + 4_000); // within the 5 s tolerance: still valid, from the cache
    expect(detail(await r.authorize(cached))).toBe('ok');
    r.advance(1_000);
    expect(detail(await r.authorize(cached))).toBe('401 The access token expired.');
  });

  it('is bounded: past verifiedTokenCacheSize the oldest entry goes', async () => {
    const r = rig({ cacheSize: 2 });
    const tokens = [await r.token('agent-1'), await r.token('agent-2'), await r.token('agent-3')];
    for (const t of tokens) expect(detail(await r.authorize(t))).toBe('ok');
    await r.swapKey();
    // agent-1's entry made room for agent-3's: it is verified afresh (and fails against the swapped key).
    expect(detail(await r.authorize(tokens[0]))).toBe('401 The access token signature is invalid.');
    expect(detail(await r.authorize(tokens[1]))).toBe('ok');
    expect(detail(await r.authorize(tokens[2]))).toBe('ok');
  });

  it('verifiedTokenCacheSize 0 turns it off: every request is verified', async () => {
    const r = rig({ cacheSize: 0 });
    const t = await r.token();
    expect(detail(await r.authorize(t))).toBe('ok');
    await r.swapKey();
    expect(detail(await r.authorize(t))).toBe('401 The access token signature is invalid.');
  });
});
