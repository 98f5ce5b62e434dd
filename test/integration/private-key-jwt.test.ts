// Agents without secrets, private_key_jwt (RFC 7523 §2.2) at the OAuth token endpoint, through the real HTTP
// interface on Postgres + Redis with two instances: ES256, RS256, PS256 and EdDSA assertions accepted; replayed
// (also at the other instance, also past exp inside the clock tolerance), expired, future, mis-addressed (also
// to us and someone else), wrong-key, `alg: none` and HS256 assertions refused with the same 401 invalid_client;
// the secret door refuses a key agent; a removed key's tokens are refused at a platform within a second; keys
// added and removed through the admin API with their audit events; a deactivated agent or a grant taken back
// refused at once at both instances.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { AdminClient, type PlatformRecord } from '../../kit/admin.js';
import { createDatabase, startService, type ServiceHandle, type TestDatabase } from '../support/service.js';
import { call, msUntilRefused, startPlatform, type Platform } from '../support/revocation.js';

const ISSUER = 'https://ace.test.example';
const ALGS = ['ES256', 'RS256', 'PS256', 'EdDSA'] as const;
type Alg = (typeof ALGS)[number];

let database: TestDatabase;
let a: ServiceHandle;
let b: ServiceHandle;
let admin: AdminClient;
let shop: PlatformRecord;
let platform: Platform;

interface KeyAgent {
  agentId: string;
  apiKeyId: string;
  keys: Record<string, { privateKey: CryptoKey; kid: string; alg: Alg; jwk: JWK }>;
}

async function keyPair(alg: Alg, kid = `${alg.toLowerCase()}-${randomBytes(3).toString('hex')}`) {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true, ...(alg === 'EdDSA' ? { crv: 'Ed25519' } : {}) });
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid, alg };
  return { jwk, privateKey, kid, alg };
}

async function keyAgent(name: string, algs: readonly Alg[] = ['ES256']): Promise<KeyAgent> {
  const pairs = await Promise.all(algs.map((alg) => keyPair(alg)));
  const created = await admin.call('POST', '/admin/v1/agents', { name, token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: pairs.map((p) => p.jwk) } }, 201);
  expect(created.secret).toBeUndefined();
  expect(created.token_endpoint_auth_method).toBe('private_key_jwt');
  await admin.grant(created.agent_id, shop.platform_id, ['read']);
  return { agentId: created.agent_id, apiKeyId: created.api_key_id, keys: Object.fromEntries(pairs.map((p) => [p.alg, p])) };
}

interface AssertionOptions {
  alg?: Alg;
  aud?: string | string[];
  expIn?: number;
  iatOffset?: number;
  jti?: string | null;
  iss?: string;
  sub?: string;
  privateKey?: CryptoKey;
  kid?: string;
}

async function assertion(agent: KeyAgent, o: AssertionOptions = {}): Promise<string> {
  const key = agent.keys[o.alg ?? 'ES256'] ?? Object.values(agent.keys)[0]!;
  const now = Math.floor(Date.now() / 1000);
  const claims: Record<string, unknown> = {};
  if (o.jti !== null) claims.jti = o.jti ?? randomUUID();
  return new SignJWT(claims)
    .setProtectedHeader({ alg: key.alg, kid: o.kid ?? key.kid })
    .setIssuer(o.iss ?? agent.apiKeyId)
    .setSubject(o.sub ?? agent.apiKeyId)
    .setAudience(o.aud ?? ISSUER)
    .setIssuedAt(now + (o.iatOffset ?? 0))
    .setExpirationTime(now + (o.expIn ?? 60))
    .sign(o.privateKey ?? key.privateKey);
}

async function oauthToken(service: ServiceHandle, form: Record<string, string>) {
  const response = await fetch(`${service.publicUrl}/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any>, headers: response.headers };
}

const assertionForm = (jwt: string, extra: Record<string, string> = {}) => ({
  grant_type: 'client_credentials',
  client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
  client_assertion: jwt,
  audience: shop.platform_id,
  ...extra,
});

const payloadOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString());

beforeAll(async () => {
  database = await createDatabase();
  const redisKeyPrefix = `ace-test-${randomBytes(4).toString('hex')}:`;
  const env = { ISSUER, RATE_LIMIT_AUTH_FAIL_POINTS: '1000', RATE_LIMIT_TOKEN_POINTS: '100000' };
  [a, b] = await Promise.all([startService({ mode: 'real', database, redisKeyPrefix, env }), startService({ mode: 'real', database, redisKeyPrefix, env })]);
  admin = new AdminClient(a);
  shop = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'read' }] });
  platform = await startPlatform({ serviceUrl: b.publicUrl, platformId: shop.platform_id, issuer: ISSUER, feedToken: await admin.feedToken(shop.platform_id) });
}, 120_000);

afterAll(async () => {
  await platform?.close();
  await Promise.all([a?.stop('SIGKILL'), b?.stop('SIGKILL')]);
  await database?.drop();
});

describe('private_key_jwt on Postgres + Redis, two instances', () => {
  it('lists private_key_jwt and its algorithms in the RFC 8414 metadata', async () => {
    const metadata = (await (await fetch(`${a.publicUrl}/.well-known/oauth-authorization-server`)).json()) as Record<string, string[]>;
    expect(metadata.token_endpoint_auth_methods_supported).toContain('private_key_jwt');
    expect(metadata.token_endpoint_auth_signing_alg_values_supported).toEqual(expect.arrayContaining([...ALGS]));
    expect(metadata.token_endpoint_auth_signing_alg_values_supported).not.toContain('none');
    expect(metadata.token_endpoint_auth_signing_alg_values_supported.some((alg) => alg.startsWith('HS'))).toBe(false);
  });

  it('accepts ES256, RS256, PS256 and EdDSA assertions, aud the token endpoint or the issuer (alone), and issues the agent a token', async () => {
    const agent = await keyAgent('every-alg', ALGS);
    for (const alg of ALGS) {
      for (const aud of [ISSUER, `${a.publicUrl}/oauth2/token`, [ISSUER]]) {
        const { status, body } = await oauthToken(a, assertionForm(await assertion(agent, { alg, aud })));
        expect(status, `${alg} aud=${aud}: ${JSON.stringify(body)}`).toBe(200);
        const claims = payloadOf(body.access_token);
        expect(claims).toMatchObject({ sub: agent.agentId, client_id: agent.apiKeyId, aud: shop.platform_id, iss: ISSUER });
      }
    }
    // client_id may be sent too (RFC 7521 §4.2): it must then be the assertion's iss.
    const withId = await oauthToken(a, assertionForm(await assertion(agent), { client_id: agent.apiKeyId }));
    expect(withId.status).toBe(200);
    // The token works at the platform.
    const { body } = await oauthToken(b, assertionForm(await assertion(agent)));
    expect((await call(platform.url, body.access_token)).status).toBe(200);
  });

  it('refuses every bad assertion with one 401 invalid_client body', async () => {
    const agent = await keyAgent('bad-assertions', ['ES256', 'RS256']);
    const other = await keyAgent('someone-else');
    const stranger = await keyPair('ES256', agent.keys.ES256!.kid);
    const replayed = await assertion(agent);
    expect((await oauthToken(a, assertionForm(replayed))).status).toBe(200);
    const now = Math.floor(Date.now() / 1000);
    const header = (h: object) => Buffer.from(JSON.stringify(h)).toString('base64url');
    const body = (p: object) => Buffer.from(JSON.stringify(p)).toString('base64url');
    const claims = { iss: agent.apiKeyId, sub: agent.apiKeyId, aud: ISSUER, iat: now, exp: now + 60, jti: randomUUID() };
    const unsigned = `${header({ alg: 'none', kid: agent.keys.ES256!.kid })}.${body(claims)}.`;
    const hs256 = await new SignJWT({ jti: randomUUID() })
      .setProtectedHeader({ alg: 'HS256', kid: agent.keys.ES256!.kid })
      .setIssuer(agent.apiKeyId)
      .setSubject(agent.apiKeyId)
      .setAudience(ISSUER)
      .setIssuedAt()
      .setExpirationTime('1m')
      // The classic confusion: the agent's public key used as an HMAC secret.
      .sign(new TextEncoder().encode(JSON.stringify(agent.keys.ES256!.jwk)));
    const cases: Record<string, { jwt: string; service?: ServiceHandle; extra?: Record<string, string> }> = {
      'replayed at the same instance': { jwt: replayed },
      'replayed at the other instance': { jwt: replayed, service: b },
      expired: { jwt: await assertion(agent, { expIn: -120, iatOffset: -300 }) },
      'exp too far ahead': { jwt: await assertion(agent, { expIn: 3600 }) },
      'iat in the future': { jwt: await assertion(agent, { iatOffset: 600, expIn: 660 }) },
      'addressed elsewhere': { jwt: await assertion(agent, { aud: 'https://other.example/token' }) },
      'addressed elsewhere too': { jwt: await assertion(agent, { aud: ['https://evil.example', ISSUER] }) },
      'addressed to the issuer and the token endpoint': { jwt: await assertion(agent, { aud: [ISSUER, `${a.publicUrl}/oauth2/token`] }) },
      'signed by a key the agent does not hold': { jwt: await assertion(agent, { privateKey: stranger.privateKey }) },
      "signed by another agent's key": { jwt: await assertion(agent, { privateKey: other.keys.ES256!.privateKey, kid: other.keys.ES256!.kid }) },
      'iss is another agent': { jwt: await assertion(agent, { iss: other.apiKeyId }) },
      'no jti': { jwt: await assertion(agent, { jti: null }) },
      'alg none': { jwt: unsigned },
      HS256: { jwt: hs256 },
      'unknown client': { jwt: await assertion({ ...agent, apiKeyId: `${agent.apiKeyId.slice(0, -4)}0000` }) },
      'client_id differs': { jwt: await assertion(agent), extra: { client_id: other.apiKeyId } },
      garbage: { jwt: 'not.a.jwt' },
    };
    const answers = new Set<string>();
    for (const [name, { jwt, service, extra }] of Object.entries(cases)) {
      const { status, body: answer, headers } = await oauthToken(service ?? a, assertionForm(jwt, extra));
      expect(status, `${name}: ${JSON.stringify(answer)}`).toBe(401);
      expect(answer.error, name).toBe('invalid_client');
      expect(headers.get('cache-control')).toBe('no-store');
      answers.add(JSON.stringify(answer));
    }
    // No oracle: the same body whatever the reason.
    expect([...answers]).toHaveLength(1);
    // The reasons are counted (never told to the client).
    const metrics = await (await fetch(`${a.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/ace_client_assertions_total\{method="private_key_jwt",outcome="jti_replayed"\} [1-9]/);
  });

  it('remembers a jti as long as its assertion is accepted: exp 5 s ago (inside the clock tolerance) is used once, at either instance', async () => {
    const agent = await keyAgent('late-assertion');
    const late = await assertion(agent, { expIn: -5, iatOffset: -60 });
    expect((await oauthToken(a, assertionForm(late))).status).toBe(200);
    expect((await oauthToken(a, assertionForm(late))).status).toBe(401);
    expect((await oauthToken(b, assertionForm(late))).status).toBe(401);
  });

  it('refuses two authentication methods at once, and a secret at the secret doors for a key agent', async () => {
    const agent = await keyAgent('no-secret');
    const both = await oauthToken(a, assertionForm(await assertion(agent), { client_secret: 'x' }));
    expect(both.status).toBe(400);
    expect(both.body.error).toBe('invalid_request');
    const contract = await fetch(`${a.publicUrl}/api/v1/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key_id: agent.apiKeyId, secret: 'a'.repeat(43), platform_id: shop.platform_id }),
    });
    expect(contract.status).toBe(401);
  });

  it('adds and removes keys; a removed key signs nothing more and its tokens are refused at the platform within a second', async () => {
    const agent = await keyAgent('rotating', ['ES256']);
    const next = await keyPair('EdDSA');
    const added = await admin.call('POST', `/admin/v1/agents/${agent.agentId}/keys`, next.jwk, 201);
    expect(added.jwks.keys.map((k: JWK) => k.kid)).toEqual([agent.keys.ES256!.kid, next.kid]);
    expect((await admin.request('POST', `/admin/v1/agents/${agent.agentId}/keys`, next.jwk)).status).toBe(409);
    // A private key is never taken.
    const leaked = await keyPair('ES256');
    const withPrivate = { ...(await exportJWK(leaked.privateKey)), kid: 'leaked' };
    expect((await admin.request('POST', `/admin/v1/agents/${agent.agentId}/keys`, withPrivate)).status).toBe(422);
    agent.keys.EdDSA = next;

    const { body } = await oauthToken(b, assertionForm(await assertion(agent, { alg: 'ES256' })));
    const accessToken = body.access_token as string;
    expect((await call(platform.url, accessToken)).status).toBe(200);

    const removedAt = Date.now();
    await admin.call('DELETE', `/admin/v1/agents/${agent.agentId}/keys/${encodeURIComponent(agent.keys.ES256!.kid)}`, undefined, 204);
    expect(await msUntilRefused(platform.url, accessToken, removedAt, 5000)).toBeLessThan(1000 + 500);
    // At both instances: the removed key is refused, the remaining one works.
    for (const service of [a, b]) {
      expect((await oauthToken(service, assertionForm(await assertion(agent, { alg: 'ES256' })))).status).toBe(401);
      expect((await oauthToken(service, assertionForm(await assertion(agent, { alg: 'EdDSA' })))).status).toBe(200);
    }
    const events = await admin.call('GET', `/admin/v1/events?agent_id=${agent.agentId}&type=agent.key_added,agent.key_removed`);
    expect(events.events.map((e: { type: string }) => e.type)).toEqual(['agent.key_added', 'agent.key_removed']);
    expect(JSON.stringify(events)).not.toContain(String(next.jwk.x));
  });

  it('refuses a deactivated key agent, and one whose grant was taken back, at once at both instances', async () => {
    const agent = await keyAgent('deactivated');
    const statuses = async () => Promise.all([a, b].map(async (service) => (await oauthToken(service, assertionForm(await assertion(agent)))).status));
    expect(await statuses()).toEqual([200, 200]);
    // The change is made at a; b learns of it through Redis (its key index carries the agent's status and grants).
    await admin.call('PATCH', `/admin/v1/agents/${agent.agentId}`, { status: 'inactive' });
    expect(await statuses()).toEqual([400, 400]);
    await admin.call('PATCH', `/admin/v1/agents/${agent.agentId}`, { status: 'active' });
    expect(await statuses()).toEqual([200, 200]);
    await admin.call('DELETE', `/admin/v1/agents/${agent.agentId}/grants/${shop.platform_id}`, undefined, 204);
    expect(await statuses()).toEqual([400, 400]);
  });

  it('refuses bad registrations with 422 and names the field', async () => {
    const weak = await generateKeyPair('RS256', { modulusLength: 1024 }).catch(() => undefined);
    const bad: Record<string, unknown>[] = [
      { name: 'x', token_endpoint_auth_method: 'private_key_jwt' },
      { name: 'x', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [{ kty: 'oct', kid: 'k', k: 'c2VjcmV0' }] } },
      { name: 'x', token_endpoint_auth_method: 'private_key_jwt', jwks_uri: 'http://example.com/jwks' },
      { name: 'x', token_endpoint_auth_method: 'private_key_jwt', jwks_uri: 'https://user:pw@example.com/jwks' },
      { name: 'x', jwks: { keys: [(await keyPair('ES256')).jwk] } },
    ];
    if (weak) bad.push({ name: 'x', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [{ ...(await exportJWK(weak.publicKey)), kid: 'weak' }] } });
    for (const body of bad) {
      const { status, body: answer } = await admin.request('POST', '/admin/v1/agents', body);
      expect(status, JSON.stringify(body)).toBe(422);
      expect(answer.error_code).toBe('validation_error');
    }
  });
});

describe('a jwks_uri naming the unspecified address, with private ranges allowed', () => {
  let open: ServiceHandle;
  beforeAll(async () => {
    open = await startService({ mode: 'embedded', env: { ISSUER, JWKS_URI_ALLOW_PRIVATE: 'true', JWKS_URI_ALLOW_LOOPBACK: 'true' } });
  }, 90_000);
  afterAll(async () => {
    await open?.dispose();
  });

  it('is refused with 422 for agents and workload issuers (a connect to it reaches this host), and nothing is stored', async () => {
    const local = new AdminClient(open);
    const port = new URL(open.publicUrl).port;
    const before = (await local.request('GET', '/admin/v1/agents')).body;
    const issuersBefore = (await local.request('GET', '/admin/v1/workload-issuers')).body;
    for (const uri of [`https://0.0.0.0:${port}/jwks`, `https://0:${port}/jwks`, `https://[::]:${port}/jwks`, `https://[::ffff:0.0.0.0]:${port}/jwks`, `https://[64:ff9b::7f00:1]:${port}/jwks`]) {
      const agent = await local.request('POST', '/admin/v1/agents', { name: 'x', token_endpoint_auth_method: 'private_key_jwt', jwks_uri: uri });
      expect(agent.status, uri).toBe(422);
      expect(agent.body.error_code).toBe('validation_error');
      expect(agent.body.detail).toMatch(/jwks_uri/);
      const issuer = await local.request('POST', '/admin/v1/workload-issuers', { issuer: 'https://issuer.example', audience: ISSUER, jwks_uri: uri });
      expect(issuer.status, uri).toBe(422);
      expect(issuer.body.error_code).toBe('validation_error');
    }
    expect((await local.request('GET', '/admin/v1/agents')).body).toEqual(before);
    expect((await local.request('GET', '/admin/v1/workload-issuers')).body).toEqual(issuersBefore);
  });
});

describe('private_key_jwt on the embedded default', () => {
  let embedded: ServiceHandle;
  beforeAll(async () => {
    embedded = await startService({ mode: 'embedded', env: { ISSUER } });
  }, 90_000);
  afterAll(async () => {
    await embedded?.dispose();
  });

  it('accepts ES256, RS256 and EdDSA assertions once each (also one inside the clock tolerance past exp); refuses replayed, expired, mis-addressed, alg none', async () => {
    const local = new AdminClient(embedded);
    const p = await local.createPlatform({ name: 'Local', scopes: [{ name: 'read' }] });
    const pairs = await Promise.all((['ES256', 'RS256', 'EdDSA'] as const).map((alg) => keyPair(alg)));
    const created = await local.call('POST', '/admin/v1/agents', { name: 'embedded-key-agent', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: pairs.map((k) => k.jwk) } }, 201);
    await local.grant(created.agent_id, p.platform_id, ['read']);
    const agent: KeyAgent = { agentId: created.agent_id, apiKeyId: created.api_key_id, keys: Object.fromEntries(pairs.map((k) => [k.alg, k])) };
    const send = async (jwt: string) => (await oauthToken(embedded, { ...assertionForm(jwt), audience: p.platform_id })).status;
    for (const alg of ['ES256', 'RS256', 'EdDSA'] as const) {
      const jwt = await assertion(agent, { alg });
      expect(await send(jwt), alg).toBe(200);
      expect(await send(jwt), `${alg} replayed`).toBe(401);
    }
    // exp 5 s ago is inside the clock tolerance: accepted, and remembered past its exp.
    const late = await assertion(agent, { expIn: -5, iatOffset: -60 });
    expect(await send(late)).toBe(200);
    expect(await send(late), 'late assertion replayed').toBe(401);
    expect(await send(await assertion(agent, { expIn: -120, iatOffset: -300 }))).toBe(401);
    expect(await send(await assertion(agent, { aud: 'https://elsewhere.example' }))).toBe(401);
    const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const now = Math.floor(Date.now() / 1000);
    expect(await send(`${part({ alg: 'none', kid: agent.keys.ES256!.kid })}.${part({ iss: agent.apiKeyId, sub: agent.apiKeyId, aud: ISSUER, iat: now, exp: now + 60, jti: randomUUID() })}.`)).toBe(401);
  });
});
