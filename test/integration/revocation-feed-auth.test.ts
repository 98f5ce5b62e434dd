// Who may read a platform's revocation feed (feed credentials: a bearer token of
// that platform on the poll and on the WebSocket upgrade, as a header or as a subprotocol), a deleted
// credential refused at every instance and its open sockets closed, the token never in the service's output,
// the middleware's feedToken, and the caps on WebSocket subscribers per client address and per process.
// Two instances share Postgres and Redis; everything goes through the real HTTP interface.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, type PlatformRecord } from '../../kit/admin.js';
import { waitFor } from '../../kit/wait.js';
import { metricSum } from '../../kit/metrics.js';
import { createDatabase, startService, type ServiceHandle, type TestDatabase } from '../support/service.js';
import { call, msUntilRefused, startPlatform, token } from '../support/revocation.js';
import { createVerifier } from '../../packages/middleware/src/index.js';

const ISSUER = 'https://ace.test';
const UNKNOWN_PLATFORM = '00000000-0000-4000-8000-000000000000';
const PER_ADDRESS = 3;
const TOTAL = 5;

let database: TestDatabase;
let a: ServiceHandle;
let b: ServiceHandle;
let admin: AdminClient;
let shop: PlatformRecord;
let other: PlatformRecord;
/** Every feed token this suite saw: none may appear in the services' output. */
const seenTokens: string[] = [];

beforeAll(async () => {
  database = await createDatabase();
  const redisKeyPrefix = `ace-test-${randomBytes(4).toString('hex')}:`;
  // TRUST_PROXY_HOPS=1: X-Forwarded-For from this (private) peer names the client, so a test can speak from two addresses.
  const env = {
    ISSUER,
    TRUST_PROXY_HOPS: '1',
    REVOCATION_WS_MAX_PER_ADDRESS: String(PER_ADDRESS),
    REVOCATION_WS_MAX: String(TOTAL),
    ACCESS_LOG: 'true',
    LOG_LEVEL: 'debug',
    RATE_LIMIT_TOKEN_POINTS: '1000000',
  };
  a = await startService({ mode: 'real', database, redisKeyPrefix, env });
  b = await startService({ mode: 'real', database, redisKeyPrefix, env });
  admin = new AdminClient(a);
  shop = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'read', description: 'read' }] });
  other = await admin.createPlatform({ name: 'Other', scopes: [{ name: 'read', description: 'read' }] });
}, 120_000);

afterAll(async () => {
  await a?.dispose();
  await b?.dispose();
  await database?.drop();
});

async function newToken(platformId: string): Promise<{ id: string; token: string }> {
  const created = await admin.createFeedCredential(platformId);
  seenTokens.push(created.feed_token);
  return { id: created.feed_credential_id, token: created.feed_token };
}

const metricsOf = async (service: ServiceHandle) => (await fetch(`${service.adminUrl}/metrics`)).text();

const feedUrl = (service: ServiceHandle, platformId: string) => `${service.publicUrl}/api/v1/platforms/${platformId}/revocations`;

async function poll(service: ServiceHandle, platformId: string, authorization?: string) {
  const response = await fetch(feedUrl(service, platformId), {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(authorization === undefined ? {} : { authorization }) },
    body: JSON.stringify({ returnImmediately: true }),
  });
  const text = await response.text();
  return { status: response.status, challenge: response.headers.get('www-authenticate'), retryAfter: response.headers.get('retry-after'), body: text ? JSON.parse(text) : undefined };
}

type WsOutcome = { status: number; protocol?: string; body?: any; retryAfter?: string | null; socket?: any };

/** A WebSocket upgrade: 101 (with the open socket) or the refusal's status, Retry-After and body. */
async function upgrade(service: ServiceHandle, platformId: string, options: { authorization?: string; protocols?: string[]; forwardedFor?: string } = {}): Promise<WsOutcome> {
  const WebSocket = (await import('ws')).default;
  const headers: Record<string, string> = {};
  if (options.authorization) headers.authorization = options.authorization;
  if (options.forwardedFor) headers['x-forwarded-for'] = options.forwardedFor;
  const url = `${feedUrl(service, platformId).replace(/^http/, 'ws')}/ws`;
  return new Promise((resolve) => {
    const socket = new WebSocket(url, options.protocols ?? [], { headers });
    socket.on('unexpected-response', (_req: unknown, res: any) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode, retryAfter: res.headers['retry-after'] ?? null, body: text ? JSON.parse(text) : undefined }));
    });
    socket.on('open', () => resolve({ status: 101, protocol: socket.protocol, socket }));
    socket.on('error', () => {});
  });
}

/** Resolves with the close code of an open `ws` socket. */
const closed = (socket: any) => new Promise<number>((resolve) => socket.once('close', (code: number) => resolve(code)));

function expectInvalidToken(answer: { status: number; challenge?: string | null; body?: any }) {
  expect(answer.status).toBe(401);
  expect(answer.body).toMatchObject({ error_code: 'unauthorized', detail: expect.any(String) });
  if (answer.challenge !== undefined) expect(answer.challenge).toBe('Bearer realm="revocations", error="invalid_token"');
}

describe('feed credentials (admin API)', () => {
  it('creates a credential whose token is shown once, lists ids without token or hash, deletes it; each change audited', async () => {
    const response = await admin.request('POST', `/admin/v1/platforms/${shop.platform_id}/feed-credentials`);
    expect(response.status).toBe(201);
    const created = response.body as Record<string, string>;
    seenTokens.push(created.feed_token);
    expect(created.feed_token).toMatch(/^acef_[A-Za-z0-9_-]{43}$/);
    expect(created).toMatchObject({ feed_credential_id: expect.any(String), platform_id: shop.platform_id, created_at: expect.any(String) });
    const listed = await admin.listFeedCredentials(shop.platform_id);
    const mine = listed.feed_credentials.find((c) => c.feed_credential_id === created.feed_credential_id);
    expect(mine).toEqual({ feed_credential_id: created.feed_credential_id, platform_id: shop.platform_id, created_at: created.created_at });
    expect(JSON.stringify(listed)).not.toContain(created.feed_token);
    await admin.deleteFeedCredential(shop.platform_id, created.feed_credential_id);
    expect((await admin.listFeedCredentials(shop.platform_id)).feed_credentials.map((c) => c.feed_credential_id)).not.toContain(created.feed_credential_id);
    // Unknown platform, unknown credential, a credential of another platform: 404 in the Error shape.
    expect((await admin.request('POST', `/admin/v1/platforms/${UNKNOWN_PLATFORM}/feed-credentials`)).status).toBe(404);
    expect((await admin.request('DELETE', `/admin/v1/platforms/${shop.platform_id}/feed-credentials/${created.feed_credential_id}`)).body).toMatchObject({ error_code: 'not_found' });
    const others = await newToken(other.platform_id);
    expect((await admin.request('DELETE', `/admin/v1/platforms/${shop.platform_id}/feed-credentials/${others.id}`)).status).toBe(404);
    const events = (await admin.call('GET', '/admin/v1/events?type=feed_credential.created,feed_credential.deleted&limit=100')) as { events: Record<string, any>[] };
    const types = events.events.filter((e) => e.feed_credential_id === created.feed_credential_id).map((e) => e.type).sort();
    expect(types).toEqual(['feed_credential.created', 'feed_credential.deleted']);
    expect(JSON.stringify(events)).not.toContain(created.feed_token);
  });
});

describe('the poll and the WebSocket require a feed token of the platform', () => {
  it('no token, a wrong one, another platform\'s, an unknown platform: 401 with the same answer; a valid token: 200', async () => {
    const shopToken = await newToken(shop.platform_id);
    const otherToken = await newToken(other.platform_id);
    for (const service of [a, b]) {
      expectInvalidToken(await poll(service, shop.platform_id));
      expectInvalidToken(await poll(service, shop.platform_id, 'Bearer acef_' + 'A'.repeat(43)));
      expectInvalidToken(await poll(service, shop.platform_id, 'Bearer not-even-a-feed-token'));
      expectInvalidToken(await poll(service, shop.platform_id, `Bearer ${otherToken.token}`));
      expectInvalidToken(await poll(service, UNKNOWN_PLATFORM, `Bearer ${shopToken.token}`));
      expectInvalidToken(await poll(service, shop.platform_id, `Basic ${shopToken.token}`));
      const ok = await poll(service, shop.platform_id, `Bearer ${shopToken.token}`);
      expect(ok.status).toBe(200);
      expect(ok.body).toMatchObject({ sets: expect.any(Object), moreAvailable: false });
    }
    expect(metricSum(await metricsOf(a), 'ace_revocation_feed_refused_total', { transport: 'poll', reason: 'unauthorized' })).toBeGreaterThanOrEqual(6);
  });

  it('the WebSocket upgrade: 401 without a valid token; 101 with it as a header or as a subprotocol (answered ace-feed)', async () => {
    const shopToken = await newToken(shop.platform_id);
    const otherToken = await newToken(other.platform_id);
    expectInvalidToken(await upgrade(a, shop.platform_id));
    expectInvalidToken(await upgrade(a, shop.platform_id, { authorization: `Bearer ${otherToken.token}` }));
    expectInvalidToken(await upgrade(a, shop.platform_id, { protocols: ['ace-feed', `ace-feed-token.${otherToken.token}`] }));
    expectInvalidToken(await upgrade(a, UNKNOWN_PLATFORM, { authorization: `Bearer ${shopToken.token}` }));
    const byHeader = await upgrade(a, shop.platform_id, { authorization: `Bearer ${shopToken.token}` });
    expect(byHeader.status).toBe(101);
    const bySubprotocol = await upgrade(b, shop.platform_id, { protocols: ['ace-feed', `ace-feed-token.${shopToken.token}`] });
    expect(bySubprotocol.status).toBe(101);
    expect(bySubprotocol.protocol).toBe('ace-feed');
    byHeader.socket.close();
    bySubprotocol.socket.close();
  });

  it('a deleted credential is refused at both instances within a second, and the sockets opened with it are closed (4401)', async () => {
    const doomed = await newToken(shop.platform_id);
    const kept = await newToken(shop.platform_id);
    const onA = await upgrade(a, shop.platform_id, { authorization: `Bearer ${doomed.token}` });
    const onB = await upgrade(b, shop.platform_id, { protocols: ['ace-feed', `ace-feed-token.${doomed.token}`] });
    const keptSocket = await upgrade(b, shop.platform_id, { authorization: `Bearer ${kept.token}` });
    expect([onA.status, onB.status, keptSocket.status]).toEqual([101, 101, 101]);
    expect((await poll(b, shop.platform_id, `Bearer ${doomed.token}`)).status).toBe(200);
    const codes = Promise.all([closed(onA.socket), closed(onB.socket)]);
    await admin.deleteFeedCredential(shop.platform_id, doomed.id);
    // The second instance hears of it over the bus (Redis pub/sub).
    await waitFor('the deleted credential refused at instance b', async () => (await poll(b, shop.platform_id, `Bearer ${doomed.token}`)).status === 401, 1000, 20);
    expectInvalidToken(await poll(a, shop.platform_id, `Bearer ${doomed.token}`));
    expect(await codes).toEqual([4401, 4401]);
    expectInvalidToken(await upgrade(b, shop.platform_id, { authorization: `Bearer ${doomed.token}` }));
    // The other credential of the platform (rotation: both live until the old one is deleted) still works.
    expect((await poll(a, shop.platform_id, `Bearer ${kept.token}`)).status).toBe(200);
    expect(keptSocket.socket.readyState).toBe(1);
    keptSocket.socket.close();
  });

  // The wrong token is refused on the headers (beforeBody): the body is never read, yet uWS must still consume
  // it, or its bytes would be parsed as the next request on the keep-alive connection.
  it('a wrong token is refused before its body is read, and the unread body never desynchronises the connection', async () => {
    const { token: valid } = await newToken(shop.platform_id);
    // Right after a change the platform's credentials may be reloading: a wrong token with a body that is no
    // JSON is still refused as a wrong token (the token is checked before the body, on every path).
    const during = await fetch(feedUrl(a, shop.platform_id), { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer acef_${'y'.repeat(43)}` }, body: 'not json' });
    expect(during.status).toBe(401);
    // The new credential is in the index (a reload in progress is decided after the body, by the handler).
    await waitFor('the new credential to be known', async () => (await poll(a, shop.platform_id, `Bearer ${valid}`)).status === 200, 10_000, 20);
    const path = `/api/v1/platforms/${shop.platform_id}/revocations`;
    // A body that is itself a request: served as one if the parser lost its place.
    const smuggled = 'GET /.well-known/jwks.json HTTP/1.1\r\nHost: x\r\n\r\n';
    const head = (authorization: string, length: number) =>
      `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: ${authorization}\r\nContent-Length: ${length}\r\n\r\n`;
    const wrong = `Bearer acef_${'x'.repeat(43)}`;
    const good = JSON.stringify({ returnImmediately: true });
    const socket = net.connect(Number(new URL(a.publicUrl).port), '127.0.0.1');
    let received = '';
    socket.on('data', (chunk) => (received += chunk));
    await once(socket, 'connect');
    // 1. pipelined in one write: a wrong token with a request-shaped body, then a valid poll.
    socket.write(head(wrong, smuggled.length) + smuggled + head(`Bearer ${valid}`, good.length) + good);
    await waitFor('two answers', () => (received.match(/HTTP\/1\.1 \d{3}/g) ?? []).length >= 2, 10_000, 20);
    // 2. the body sent only after the 401 arrived, then a valid poll.
    socket.write(head(wrong, smuggled.length));
    await waitFor('the third answer', () => (received.match(/HTTP\/1\.1 \d{3}/g) ?? []).length >= 3, 10_000, 20);
    socket.write(smuggled + head(`Bearer ${valid}`, good.length) + good);
    await waitFor('the fourth answer', () => (received.match(/HTTP\/1\.1 \d{3}/g) ?? []).length >= 4, 10_000, 20);
    socket.destroy();
    expect((received.match(/HTTP\/1\.1 \d{3}/g) ?? [])).toEqual(['HTTP/1.1 401', 'HTTP/1.1 200', 'HTTP/1.1 401', 'HTTP/1.1 200']);
    expect(received).not.toContain('"keys"'); // no JWKS: the smuggled bytes were a body, never a request
  });

  // The headers' check of a valid token is kept for the same request's handler (no second check on the hot
  // path), but only while the credential index is unchanged: a deletion between headers and body counts.
  it('a poll whose credential is deleted while its body is on the way is refused', async () => {
    const doomed = await newToken(shop.platform_id);
    await waitFor('the new credential to be known', async () => (await poll(a, shop.platform_id, `Bearer ${doomed.token}`)).status === 200, 10_000, 20);
    const body = JSON.stringify({ returnImmediately: true });
    const request = `POST /api/v1/platforms/${shop.platform_id}/revocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer ${doomed.token}\r\nContent-Length: ${body.length}\r\n\r\n`;
    const socket = net.connect(Number(new URL(a.publicUrl).port), '127.0.0.1');
    let received = '';
    socket.on('data', (chunk) => (received += chunk));
    await once(socket, 'connect');
    // 1. the whole request at once: accepted.
    socket.write(request + body);
    await waitFor('the first answer', () => /HTTP\/1\.1 \d{3}/.test(received), 10_000, 20);
    // 2. the headers only; then the credential is deleted and this instance hears of it; then the body.
    socket.write(request);
    await admin.deleteFeedCredential(shop.platform_id, doomed.id);
    await waitFor('the deleted credential refused at instance a', async () => (await poll(a, shop.platform_id, `Bearer ${doomed.token}`)).status === 401, 10_000, 20);
    socket.write(body);
    await waitFor('the second answer', () => (received.match(/HTTP\/1\.1 \d{3}/g) ?? []).length >= 2, 10_000, 20);
    socket.destroy();
    expect(received.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 401']);
  });

  it('a poll body is judged with its media type: the bytes of an accepted JSON poll sent as text/plain get 415', async () => {
    const { token: valid } = await newToken(shop.platform_id);
    await waitFor('the new credential to be known', async () => (await poll(a, shop.platform_id, `Bearer ${valid}`)).status === 200, 10_000, 20);
    const send = (contentType: string) =>
      fetch(feedUrl(a, shop.platform_id), { method: 'POST', headers: { 'content-type': contentType, authorization: `Bearer ${valid}` }, body: JSON.stringify({ ack: [], returnImmediately: true }) });
    expect((await send('application/json')).status).toBe(200);
    const plain = await send('text/plain');
    expect(plain.status).toBe(415);
    expect(await plain.json()).toMatchObject({ error_code: 'unsupported_media_type' });
    expect((await send('application/json')).status).toBe(200);
  });

  it('the SSF configuration advertises the bearer authorization scheme', async () => {
    const config = (await (await fetch(`${a.publicUrl}/.well-known/ssf-configuration`)).json()) as Record<string, unknown>;
    expect(config.authorization_schemes).toEqual([{ spec_urn: 'urn:ietf:rfc:6750' }]);
  });
});

describe('caps on WebSocket subscribers', () => {
  it(`per address (${PER_ADDRESS}): the next is refused 429 with Retry-After while another address gets 101; in total (${TOTAL}): 503; a closed socket frees its place`, async () => {
    const { token: feedToken } = await newToken(shop.platform_id);
    const authorization = `Bearer ${feedToken}`;
    const open: any[] = [];
    for (let i = 0; i < PER_ADDRESS; i++) {
      const ok = await upgrade(a, shop.platform_id, { authorization, forwardedFor: '198.51.100.7' });
      expect(ok.status).toBe(101);
      open.push(ok.socket);
    }
    const refused = await upgrade(a, shop.platform_id, { authorization, forwardedFor: '198.51.100.7' });
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ error_code: 'rate_limited', detail: expect.any(String) });
    expect(Number(refused.retryAfter)).toBeGreaterThan(0);
    // Another address still gets in.
    const elsewhere = await upgrade(a, shop.platform_id, { authorization, forwardedFor: '203.0.113.9' });
    expect(elsewhere.status).toBe(101);
    open.push(elsewhere.socket);
    const fifth = await upgrade(a, shop.platform_id, { authorization, forwardedFor: '203.0.113.10' });
    expect(fifth.status).toBe(101);
    open.push(fifth.socket);
    // The process holds TOTAL sockets: the next one, from a fresh address, is refused 503.
    const full = await upgrade(a, shop.platform_id, { authorization, forwardedFor: '203.0.113.11' });
    expect(full.status).toBe(503);
    expect(full.body).toMatchObject({ error_code: 'service_unavailable' });
    expect(Number(full.retryAfter)).toBeGreaterThan(0);
    // Refused before any work: no token check needed to be refused by a cap, and they are counted.
    expect(metricSum(await metricsOf(a), 'ace_revocation_feed_refused_total', { transport: 'websocket', reason: 'per_address' })).toBeGreaterThanOrEqual(1);
    expect(metricSum(await metricsOf(a), 'ace_revocation_feed_refused_total', { transport: 'websocket', reason: 'total' })).toBeGreaterThanOrEqual(1);
    // Closing one of the first address's sockets frees a place for it (and one in the total).
    const first = open.shift();
    const gone = closed(first);
    first.close();
    await gone;
    let again: WsOutcome | undefined;
    await waitFor('a place freed for the first address', async () => {
      again = await upgrade(a, shop.platform_id, { authorization, forwardedFor: '198.51.100.7' });
      return again.status === 101;
    });
    open.push(again!.socket);
    // The other instance counts its own sockets.
    const onB = await upgrade(b, shop.platform_id, { authorization, forwardedFor: '198.51.100.7' });
    expect(onB.status).toBe(101);
    open.push(onB.socket);
    for (const socket of open) socket.close();
  });
});

describe('the middleware and its feedToken', () => {
  it('with a valid token it refuses a revoked token; without one it fails at construction naming the option', async () => {
    const { token: feedToken } = await newToken(shop.platform_id);
    const platform = await startPlatform({ serviceUrl: a.publicUrl, platformId: shop.platform_id, issuer: ISSUER, feedToken });
    try {
      const agent = await admin.createAgent('feed-auth');
      await admin.grant(agent.agent_id, shop.platform_id, ['read']);
      const t = await token(a.publicUrl, agent.api_key_id, agent.secret, shop.platform_id);
      expect((await call(platform.url, t)).status).toBe(200);
      await admin.patchAgent(agent.agent_id, { status: 'inactive' });
      await msUntilRefused(platform.url, t, Date.now());
      expect(platform.verifier.revocationStats()).toMatchObject({ connected: true, stale: false });
    } finally {
      await platform.close();
    }
    const yaml = await (await fetch(`${a.publicUrl}/api/v1/platforms/${shop.platform_id}/scopes.yaml`)).text();
    expect(() => createVerifier({ serviceUrl: a.publicUrl, issuer: ISSUER, scopesYaml: yaml })).toThrow(/feedToken/);
    expect(() => createVerifier({ serviceUrl: a.publicUrl, issuer: ISSUER, scopesYaml: yaml, revocationFeed: false })).not.toThrow();
  });

  it('with a deleted token it warns, goes stale and refuses per failMode "closed"', async () => {
    const doomed = await newToken(shop.platform_id);
    const warnings: string[] = [];
    const platform = await startPlatform({
      serviceUrl: a.publicUrl,
      platformId: shop.platform_id,
      issuer: ISSUER,
      feedToken: doomed.token,
      feed: { failMode: 'closed', staleAfterSeconds: 2, pollIntervalSeconds: 1, reconnectBaseSeconds: 0.1, reconnectMaxSeconds: 0.5, warn: (m) => void warnings.push(m) },
    });
    try {
      const agent = await admin.createAgent('feed-auth-stale');
      await admin.grant(agent.agent_id, shop.platform_id, ['read']);
      const t = await token(a.publicUrl, agent.api_key_id, agent.secret, shop.platform_id);
      expect((await call(platform.url, t)).status).toBe(200);
      await admin.deleteFeedCredential(shop.platform_id, doomed.id);
      await waitFor('the middleware refusing once its copy is stale', async () => (await call(platform.url, t)).status === 503);
      expect(warnings.some((w) => w.includes('401'))).toBe(true);
      expect(platform.verifier.revocationStats()).toMatchObject({ stale: true, connected: false });
    } finally {
      await platform.close();
    }
  });
});

describe('secrets', () => {
  it('no feed token ever reaches the services\' output (access log and debug level on)', () => {
    expect(seenTokens.length).toBeGreaterThan(5);
    const output = a.output() + b.output();
    expect(output.length).toBeGreaterThan(0);
    for (const t of seenTokens) {
      expect(output).not.toContain(t);
      expect(output).not.toContain(t.slice(5));
    }
  });
});
