// End to end: the real service, platforms protected by the middleware (node:http, Express, Fastify) and an
// agent using the client. Token TTL 3 s and a 2 s key propagation window make expiry and rotation quick.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { inspect } from 'node:util';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import express from 'express';
import Fastify from 'fastify';
import { decodeJwt, decodeProtectedHeader, generateKeyPair, SignJWT } from 'jose';
import { startService, type ServiceHandle } from '../support/service.js';
import { AdminClient, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { AgentClient, AgentClientError } from '../../packages/client/src/index.js';
import {
  createVerifier,
  expressAgentAuth,
  fastifyAgentAuth,
  protectNodeHandler,
  type AgentClaims,
  type Verifier,
} from '../../packages/middleware/src/index.js';
import { sleep } from '../../kit/wait.js';

const TOKEN_PATH = '/api/v1/auth/token';
const JWKS_PATH = '/.well-known/jwks.json';

/** A fetch that records every call (at send time) so tests can count token and JWKS requests. */
function recordingFetch() {
  const calls: { path: string; status?: number }[] = [];
  const wrapped: typeof fetch = async (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const call: { path: string; status?: number } = { path: new URL(url).pathname };
    calls.push(call);
    const response = await fetch(input, init);
    call.status = response.status;
    return response;
  };
  return { fetch: wrapped, count: (path: string) => calls.filter((c) => c.path === path).length };
}

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

let service: ServiceHandle;
let admin: AdminClient;
let shop: PlatformRecord;
let other: PlatformRecord;
let agent: AgentCredentials;
let shopYaml: string;
let shopFeedToken: string;
let jwksA: ReturnType<typeof recordingFetch>;
let verifierA: Verifier;
let shopUrl: string;
let otherUrl: string;
const servers: { close(): unknown }[] = [];
/** Tokens the shop platform treats as revoked (answers 401 before the middleware), to provoke a refresh. */
const revoked = new Set<string>();

function echo(req: { agent?: AgentClaims; method?: string }, body: string) {
  return JSON.stringify({ agentId: req.agent!.agentId, scopes: req.agent!.scopes, route: req.agent!.route?.path ?? null, method: req.method, body });
}

function newClient(extra: Partial<Parameters<typeof AgentClient.start>[0]> = {}) {
  const recorder = recordingFetch();
  const started = AgentClient.start({
    serviceUrl: service.publicUrl,
    apiKeyId: agent.api_key_id,
    secret: agent.secret,
    fetch: recorder.fetch,
    platforms: { [shopUrl]: shop.platform_id, [otherUrl]: other.platform_id },
    ...extra,
  });
  return started.then((client) => ({ client, tokenRequests: () => recorder.count(TOKEN_PATH) }));
}

beforeAll(async () => {
  service = await startService({
    mode: 'real',
    env: { TOKEN_TTL_SECONDS: '3', KEY_PROPAGATION_SECONDS: '2', KEY_REFRESH_SECONDS: '1' },
  });
  admin = new AdminClient(service);
  shop = await admin.createPlatform({
    name: 'Shop',
    domain: 'shop.example.com',
    scopes: [
      { name: 'orders:read', description: 'Read orders' },
      { name: 'orders:write', description: 'Create orders' },
      { name: 'orders:delete', description: 'Delete orders' },
    ],
    routes: [
      { method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] },
      { method: 'POST', path: '/orders', scopes: ['orders:write'] },
      { method: 'DELETE', path: '/orders/{id}', scopes: ['orders:delete'] },
      { method: 'GET', path: '/whoami', scopes: [] },
    ],
  });
  other = await admin.createPlatform({
    name: 'Other',
    scopes: [{ name: 'things:read', description: 'Read things' }],
    routes: [{ method: 'GET', path: '/things', scopes: ['things:read'] }],
  });
  agent = await admin.createAgent('client-e2e');
  await admin.grant(agent.agent_id, shop.platform_id, ['orders:read', 'orders:write']);
  await admin.grant(agent.agent_id, other.platform_id, ['things:read']);

  const scopeFile = await fetch(`${service.publicUrl}/api/v1/platforms/${shop.platform_id}/scopes.yaml`);
  expect(scopeFile.status).toBe(200);
  shopYaml = await scopeFile.text();

  jwksA = recordingFetch();
  shopFeedToken = await admin.feedToken(shop.platform_id);
  verifierA = createVerifier({ serviceUrl: service.publicUrl, scopesYaml: shopYaml, feedToken: shopFeedToken, fetch: jwksA.fetch, clockToleranceSeconds: 0 });
  const protectedShop = protectNodeHandler(verifierA, (req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(echo(req, body));
    });
  });
  const shopServer = http.createServer((req, res) => {
    const auth = req.headers.authorization ?? '';
    if (auth.startsWith('Bearer ') && revoked.has(auth.slice(7))) {
      res.writeHead(401, { 'www-authenticate': 'Bearer realm="shop", error="invalid_token"' });
      return res.end();
    }
    protectedShop(req, res);
  });
  shopUrl = await listen(shopServer);
  servers.push(shopServer);

  const otherYaml = await (await fetch(`${service.publicUrl}/api/v1/platforms/${other.platform_id}/scopes.yaml`)).text();
  const verifierB = createVerifier({ serviceUrl: service.publicUrl, scopesYaml: otherYaml, feedToken: await admin.feedToken(other.platform_id) });
  const otherServer = http.createServer(protectNodeHandler(verifierB, (req, res) => res.end(echo(req, ''))));
  otherUrl = await listen(otherServer);
  servers.push(otherServer);
}, 120_000);

afterAll(async () => {
  for (const server of servers) await server.close();
  verifierA?.close();
  await service?.dispose();
});

describe('agent client with node:http platform middleware', () => {
  it('lists the platforms at start and maps URLs to them', async () => {
    const { client } = await newClient();
    expect(client.agentId).toBe(agent.agent_id);
    const listed = client.platforms();
    expect(listed.map((p) => p.platform_id).sort()).toEqual([shop.platform_id, other.platform_id].sort());
    expect(listed.find((p) => p.platform_id === shop.platform_id)!.granted_scopes).toEqual(['orders:read', 'orders:write']);
    expect(client.platformFor(`${shopUrl}/orders/1`)).toBe(shop.platform_id);
    expect(client.platformFor(`${otherUrl}/things`)).toBe(other.platform_id);
    // hostname is null while the domain is unverified; once verified, the listing maps it (https only).
    expect(client.platformFor('https://shop.example.com/orders/1')).toBeUndefined();
    await admin.patchPlatform(shop.platform_id, { verification_status: 'verified' });
    await client.reloadPlatforms();
    expect(client.platforms().find((p) => p.platform_id === shop.platform_id)!.hostname).toBe('shop.example.com');
    expect(client.platformFor('https://shop.example.com/orders/1')).toBe(shop.platform_id);
    expect(client.platformFor('http://shop.example.com/orders/1')).toBeUndefined();
    expect(client.platformFor('https://elsewhere.example.com/')).toBeUndefined();
  });

  it('reaches the routes its scopes allow, reusing one token, and is refused on the others (after one step-up try)', async () => {
    const { client, tokenRequests } = await newClient({ refreshSkewSeconds: 0 });
    const read = await client.fetch(`${shopUrl}/orders/42?expand=1`);
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({ agentId: agent.agent_id, route: '/orders/{id}', scopes: ['orders:read', 'orders:write'] });

    const write = await client.fetch(`${shopUrl}/orders`, { method: 'POST', body: '{"sku":"a1"}', headers: { 'content-type': 'application/json' } });
    expect(write.status).toBe(200);
    expect(((await write.json()) as { body: string }).body).toBe('{"sku":"a1"}');

    const open = await client.fetch(`${shopUrl}/whoami`);
    expect(open.status).toBe(200);

    const remove = await client.fetch(`${shopUrl}/orders/42`, { method: 'DELETE' });
    expect(remove.status).toBe(403);
    const challenge = remove.headers.get('www-authenticate')!;
    expect(challenge).toMatch(/^Bearer realm="[^"]+"/);
    expect(challenge).toContain('error="insufficient_scope"');
    expect(challenge).toContain('scope="orders:delete"');
    expect(await remove.json()).toMatchObject({ error_code: 'insufficient_scope' });

    // The 403 insufficient_scope asked for one new token (scope step-up: test/integration/client-scope-step-up.test.ts);
    // the grant has not changed, so the new one is refused too and the platform's 403 stands.
    expect(tokenRequests()).toBe(2);

    // Not in the scope file: denied by default, even with a valid token; no further token within the
    // replacement interval (one per token every 5 s).
    const unlisted = await client.fetch(`${shopUrl}/admin/export`);
    expect(unlisted.status).toBe(403);
    expect(unlisted.headers.get('www-authenticate')).toContain('error="insufficient_scope"');

    expect(tokenRequests()).toBe(2);
  });

  it('answers a request without a token with 401 and a challenge without an error attribute', async () => {
    const bare = await fetch(`${shopUrl}/orders/1`);
    expect(bare.status).toBe(401);
    expect(bare.headers.get('www-authenticate')).toBe(`Bearer realm="${shop.platform_id}"`);
    expect(await bare.json()).toMatchObject({ error_code: 'unauthorized' });

    const basic = await fetch(`${shopUrl}/orders/1`, { headers: { authorization: 'Basic dXNlcjpwYXNz' } });
    expect(basic.status).toBe(401);
    expect(basic.headers.get('www-authenticate')).not.toContain('error=');

    const malformed = await fetch(`${shopUrl}/orders/1`, { headers: { authorization: 'Bearer two tokens' } });
    expect(malformed.status).toBe(400);
    expect(malformed.headers.get('www-authenticate')).toContain('error="invalid_request"');

    const garbage = await fetch(`${shopUrl}/orders/1`, { headers: { authorization: 'Bearer not.a.jwt' } });
    expect(garbage.status).toBe(401);
    expect(garbage.headers.get('www-authenticate')).toContain('error="invalid_token"');
  });

  it('refuses a token minted for another platform by its aud', async () => {
    const { client } = await newClient();
    const foreign = await client.token(other.platform_id);
    expect(decodeJwt(foreign).aud).toBe(other.platform_id);
    // The same token works where it belongs ...
    const home = await fetch(`${otherUrl}/things`, { headers: { authorization: `Bearer ${foreign}` } });
    expect(home.status).toBe(200);
    // ... and not on the shop.
    const response = await fetch(`${shopUrl}/orders/1`, { headers: { authorization: `Bearer ${foreign}` } });
    expect(response.status).toBe(401);
    const challenge = response.headers.get('www-authenticate')!;
    expect(challenge).toContain('error="invalid_token"');
    expect(challenge).toContain('another platform');
  });

  it('replaces a refused token once for many concurrent requests (single-flight) and retries them', async () => {
    const { client, tokenRequests } = await newClient({ refreshSkewSeconds: 0 });
    const first = await client.token(shop.platform_id);
    expect(tokenRequests()).toBe(1);
    revoked.add(first);
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        client.fetch(`${shopUrl}/orders`, { method: 'POST', body: JSON.stringify({ n: i }), headers: { 'content-type': 'application/json' } }),
      ),
    );
    expect(responses.map((r) => r.status)).toEqual(Array(20).fill(200));
    const bodies = (await Promise.all(responses.map((r) => r.json()))) as { body: string }[];
    expect(bodies.map((b) => JSON.parse(b.body).n as number).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(tokenRequests()).toBe(2);
    expect(await client.token(shop.platform_id)).not.toBe(first);
  });

  it('does not resend a streamed body after a 401', async () => {
    const { client, tokenRequests } = await newClient({ refreshSkewSeconds: 0 });
    revoked.add(await client.token(shop.platform_id));
    const stream = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"once":true}'));
        controller.close();
      },
    });
    const response = await client.fetch(`${shopUrl}/orders`, { method: 'POST', body: stream, duplex: 'half' } as RequestInit);
    expect(response.status).toBe(401);
    expect(tokenRequests()).toBe(1);
  });

  it('does not fetch a token per request from a platform that refuses every token', async () => {
    let hits = 0;
    const refusing = http.createServer((_req, res) => {
      hits++;
      res.writeHead(401, { 'www-authenticate': 'Bearer realm="x", error="invalid_token"' });
      res.end();
    });
    const url = await listen(refusing);
    servers.push(refusing);
    const { client, tokenRequests } = await newClient({ refreshSkewSeconds: 0, platforms: { [url]: shop.platform_id } });
    expect((await client.fetch(`${url}/orders/1`)).status).toBe(401);
    expect([hits, tokenRequests()]).toEqual([2, 2]); // sent, refused, one new token, sent again
    expect((await client.fetch(`${url}/orders/1`)).status).toBe(401);
    expect([hits, tokenRequests()]).toEqual([3, 2]); // the replacement was refused too: no third token
  });

  it('renews tokens before they expire: no user request fails across several token lifetimes', async () => {
    const { client, tokenRequests } = await newClient();
    const firstToken = await client.token(shop.platform_id);
    const statuses: number[] = [];
    const until = Date.now() + 8_000;
    while (Date.now() < until) {
      statuses.push((await client.fetch(`${shopUrl}/orders/7`)).status);
      await sleep(150);
    }
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(tokenRequests()).toBeGreaterThanOrEqual(3);
    // The renewals mattered: the first token is refused now that it has expired.
    const stale = await fetch(`${shopUrl}/orders/7`, { headers: { authorization: `Bearer ${firstToken}` } });
    expect(stale.status).toBe(401);
    expect(stale.headers.get('www-authenticate')).toContain('expired');
  });

  it('keeps working across a signing-key rotation: the middleware picks up the new kid at once', async () => {
    const { client } = await newClient();
    const before = decodeProtectedHeader(await client.token(shop.platform_id)).kid;
    const jwksFetchesBefore = jwksA.count(JWKS_PATH);
    const rotated = await admin.rotateKey();
    expect(rotated.kid).not.toBe(before);

    const statuses: number[] = [];
    let lastKid = before;
    const until = Date.now() + 9_000;
    while (Date.now() < until) {
      statuses.push((await client.fetch(`${shopUrl}/orders/9`)).status);
      lastKid = decodeProtectedHeader(await client.token(shop.platform_id)).kid;
      await sleep(150);
    }
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(lastKid).toBe(rotated.kid);
    const extraFetches = jwksA.count(JWKS_PATH) - jwksFetchesBefore;
    expect(extraFetches).toBeGreaterThanOrEqual(1);
    expect(extraFetches).toBeLessThanOrEqual(3);
  });

  it('bounds JWKS fetches under a flood of tokens with forged kids', async () => {
    const recorder = recordingFetch();
    const verifier = createVerifier({ serviceUrl: service.publicUrl, scopesYaml: shopYaml, feedToken: shopFeedToken, fetch: recorder.fetch, jwksCooldownSeconds: 1 });
    await verifier.ready();
    expect(recorder.count(JWKS_PATH)).toBe(1);

    const { privateKey } = await generateKeyPair('RS256');
    const forge = (kid: string) =>
      new SignJWT({ scope: 'orders:read orders:write' })
        .setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid })
        .setIssuer(service.publicUrl)
        .setAudience(shop.platform_id)
        .setSubject(agent.agent_id)
        .setIssuedAt()
        .setExpirationTime('1m')
        .sign(privateKey);

    // 20 waves of 20 tokens, a wave every 50 ms without waiting for the previous one: without a cooldown
    // each wave would find the last fetch done and start another.
    const waves = await Promise.all(Array.from({ length: 20 }, () => Promise.all(Array.from({ length: 20 }, () => forge(randomUUID())))));
    const started = Date.now();
    const pending = waves.map(async (tokens, i) => {
      await sleep(i * 50);
      return Promise.all(tokens.map((t) => verifier.authorize({ method: 'GET', path: '/orders/1', authorization: `Bearer ${t}` })));
    });
    const results = (await Promise.all(pending)).flat();
    const elapsedSeconds = (Date.now() - started) / 1000;
    expect(results).toHaveLength(400);
    expect(results.every((r) => !r.ok && r.status === 401 && r.code === 'invalid_token')).toBe(true);
    // Fetches are at least a cooldown (1 s) apart: at most one per started second, plus the one at start.
    expect(recorder.count(JWKS_PATH)).toBeLessThanOrEqual(2 + Math.ceil(elapsedSeconds));

    // A forged token naming a real kid fails on the signature, without any fetch.
    const { client } = await newClient();
    const realKid = decodeProtectedHeader(await client.token(shop.platform_id)).kid!;
    const fetchesBefore = recorder.count(JWKS_PATH);
    const wrongSignature = await verifier.authorize({ method: 'GET', path: '/orders/1', authorization: `Bearer ${await forge(realKid)}` });
    expect(wrongSignature).toMatchObject({ ok: false, status: 401 });
    expect(recorder.count(JWKS_PATH)).toBe(fetchesBefore);

    // Genuine tokens still pass.
    const genuine = await verifier.authorize({ method: 'GET', path: '/orders/1', authorization: `Bearer ${await client.token(shop.platform_id)}` });
    expect(genuine.ok).toBe(true);
    verifier.close();
  });

  it('never reveals the secret through toString, JSON or inspect, nor in errors', async () => {
    const { client } = await newClient();
    for (const text of [String(client), `${client}`, JSON.stringify(client), inspect(client), inspect(client, { showHidden: true, depth: 10 })]) {
      expect(text).not.toContain(agent.secret);
    }
    const failure = await AgentClient.start({ serviceUrl: service.publicUrl, apiKeyId: agent.api_key_id, secret: `${agent.secret}x` }).catch((e) => e);
    expect(failure).toBeInstanceOf(AgentClientError);
    expect(failure.status).toBe(401);
    expect(failure.code).toBe('invalid_credentials');
    expect(`${failure.message} ${failure.stack} ${inspect(failure)}`).not.toContain(agent.secret);
  });
});

describe('framework adapters', () => {
  it('Express: sets req.agent on granted routes and refuses the others', async () => {
    const app = express();
    app.use(expressAgentAuth(verifierA) as express.RequestHandler);
    app.get('/orders/:id', (req, res) => {
      const claims = (req as unknown as { agent: AgentClaims }).agent;
      res.json({ agentId: claims.agentId, id: req.params.id, route: claims.route?.path });
    });
    app.delete('/orders/:id', (_req, res) => res.json({ deleted: true }));
    const server = http.createServer(app);
    const url = await listen(server);
    servers.push(server);

    const { client } = await newClient({ platforms: { [url]: shop.platform_id } });
    const ok = await client.fetch(`${url}/orders/5`);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ agentId: agent.agent_id, id: '5', route: '/orders/{id}' });

    const denied = await client.fetch(`${url}/orders/5`, { method: 'DELETE' });
    expect(denied.status).toBe(403);
    expect(denied.headers.get('www-authenticate')).toContain('error="insufficient_scope"');

    const anonymous = await fetch(`${url}/orders/5`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe(`Bearer realm="${shop.platform_id}"`);
  });

  it('Fastify: the plugin protects every route and sets request.agent', async () => {
    const app = Fastify();
    await app.register(fastifyAgentAuth(verifierA));
    app.get('/orders/:id', async (request) => {
      const claims = (request as unknown as { agent: AgentClaims }).agent;
      return { agentId: claims.agentId, id: (request.params as { id: string }).id, scopes: claims.scopes };
    });
    app.delete('/orders/:id', async () => ({ deleted: true }));
    app.get('/unlisted', async () => ({ open: true }));
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    servers.push({ close: () => app.close() });

    const { client } = await newClient({ platforms: { [url]: shop.platform_id } });
    const ok = await client.fetch(`${url}/orders/6`);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ agentId: agent.agent_id, id: '6', scopes: ['orders:read', 'orders:write'] });

    const denied = await client.fetch(`${url}/orders/6`, { method: 'DELETE' });
    expect(denied.status).toBe(403);
    expect(denied.headers.get('www-authenticate')).toContain('scope="orders:delete"');

    const unlisted = await client.fetch(`${url}/unlisted`);
    expect(unlisted.status).toBe(403);

    const anonymous = await fetch(`${url}/orders/6`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).not.toContain('error=');
  });
});
