// The OAuth 2.0 door: client credentials at /oauth2/token (RFC 6749 §4.4, RFC 8707 resource, §5.2 errors),
// RFC 8414 metadata whose issuer is the tokens' iss, and RFC 9068 tokens the platform middleware accepts.
// In process: requests go through HttpServer.inject to the whole app on the memory ports
// (test/support/in-process.ts); the middleware reads the JWKS through the same fetch.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose';
import http from 'node:http';
import { createVerifier, protectNodeHandler } from '@agent-credential-exchange/middleware';
import { freePort } from '../../kit/ports.js';
import { inProcessApp, type InProcessApp } from '../support/in-process.js';

const TOKEN_LIMIT = 5;
let addressCounter = 0;
const freshAddress = () => `198.51.100.${++addressCounter}`;
const RFC9068_CLAIMS = ['iss', 'exp', 'aud', 'sub', 'client_id', 'iat', 'jti'];

describe('OAuth 2.0 client credentials and discovery', () => {
  let service: InProcessApp;
  let admin: InProcessApp['admin'];

  beforeAll(async () => {
    service = await inProcessApp({ env: { TRUST_PROXY: 'true', RATE_LIMIT_TOKEN_POINTS: String(TOKEN_LIMIT) } });
    admin = service.admin;
  });
  afterAll(async () => {
    await service?.close();
  });

  const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;
  async function oauthToken(form: string | Record<string, string>, headers: Record<string, string> = {}) {
    const response = await service.fetch(`${service.publicUrl}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': freshAddress(), ...headers },
      body: typeof form === 'string' ? form : new URLSearchParams(form).toString(),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, body: JSON.parse(text) };
  }
  const expectOAuthError = (response: Awaited<ReturnType<typeof oauthToken>>, status: number, error: string) => {
    expect(response.status, JSON.stringify(response.body)).toBe(status);
    expect(response.body).toEqual({ error, error_description: expect.any(String), detail: expect.any(String), error_code: error });
    expect(response.headers.get('cache-control')).toBe('no-store');
  };
  const jwks = async () => createLocalJWKSet((await (await service.fetch(`${service.publicUrl}/.well-known/jwks.json`)).json()) as JSONWebKeySet);

  async function seedVerified(scopes = ['orders:read', 'orders:write'], granted = scopes) {
    const domain = `shop-${crypto.randomUUID().slice(0, 8)}.example.com`;
    const platform = await admin.createPlatform({
      name: 'Shop',
      domain,
      verification_status: 'verified',
      scopes: scopes.map((name) => ({ name })),
      routes: [{ method: 'GET', path: '/orders/{id}', scopes: [scopes[0]] }],
    });
    const agent = await admin.createAgent('oauth-agent');
    await admin.grant(agent.agent_id, platform.platform_id, granted);
    return { platform, agent, domain };
  }

  it('serves RFC 8414 metadata whose issuer is the iss of the tokens it issues', async () => {
    const response = await service.fetch(`${service.publicUrl}/.well-known/oauth-authorization-server`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const metadata = (await response.json()) as Record<string, any>;
    // RFC 8414 §2: issuer and response_types_supported are REQUIRED; no query or fragment in the issuer.
    const issuer = new URL(metadata.issuer);
    expect(issuer.search + issuer.hash).toBe('');
    expect(metadata.issuer).toBe(service.config.issuer);
    expect(metadata.response_types_supported).toEqual([]);
    expect(metadata.grant_types_supported).toEqual(['client_credentials', 'urn:ietf:params:oauth:grant-type:jwt-bearer']);
    expect(metadata.token_endpoint_auth_methods_supported).toEqual(['client_secret_basic', 'client_secret_post', 'private_key_jwt']);
    expect(metadata.token_endpoint).toBe(`${service.publicUrl}/oauth2/token`);
    expect(metadata.jwks_uri).toBe(`${service.publicUrl}/.well-known/jwks.json`);
    expect((await service.fetch(metadata.jwks_uri)).status).toBe(200);
    expect(metadata.ace_revocation_feed_template).toContain('/revocations');
    // An authorization endpoint for clients whose schema requires one (the MCP SDK): it exists, never
    // redirects, and says what is true: no response type is supported (RFC 6749 §4.1.2.1).
    expect(metadata.authorization_endpoint).toBe(`${service.publicUrl}/oauth2/authorize`);
    const authorize = await service.fetch(`${metadata.authorization_endpoint}?response_type=code&client_id=x&redirect_uri=https://evil.example/cb`, { redirect: 'manual' });
    expect(authorize.status).toBe(400);
    expect(authorize.headers.get('location')).toBeNull();
    expect(((await authorize.json()) as Record<string, unknown>).error).toBe('unsupported_response_type');

    const { platform, agent } = await seedVerified();
    const issued = await oauthToken({ grant_type: 'client_credentials', audience: platform.platform_id }, { authorization: basic(agent.api_key_id, agent.secret) });
    expect(issued.status).toBe(200);
    const { payload } = await jwtVerify(issued.body.access_token, await jwks(), { issuer: metadata.issuer, audience: platform.platform_id });
    expect(payload.iss).toBe(metadata.issuer);

  });

  it('issues an RFC 9068 token (typ at+jwt) with client_secret_basic and client_secret_post, for each way of naming the platform', async () => {
    const { platform, agent, domain } = await seedVerified();
    const keys = await jwks();
    const cases: [Record<string, string>, Record<string, string>][] = [
      [{ grant_type: 'client_credentials', resource: `https://${domain}` }, { authorization: basic(agent.api_key_id, agent.secret) }],
      [{ grant_type: 'client_credentials', resource: `https://${domain.toUpperCase()}/` }, { authorization: basic(agent.api_key_id, agent.secret) }],
      [{ grant_type: 'client_credentials', resource: `urn:uuid:${platform.platform_id}`, client_id: agent.api_key_id, client_secret: agent.secret }, {}],
      [{ grant_type: 'client_credentials', audience: platform.platform_id.toUpperCase(), client_id: agent.api_key_id, client_secret: agent.secret }, {}],
    ];
    for (const [form, headers] of cases) {
      const response = await oauthToken(form, headers);
      expect(response.status, JSON.stringify([form, response.body])).toBe(200);
      expect(response.headers.get('cache-control')).toBe('no-store');
      expect(response.body).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 900, scope: 'orders:read orders:write' });
      expect(decodeProtectedHeader(response.body.access_token).typ).toBe('at+jwt');
      const { payload } = await jwtVerify(response.body.access_token, keys, { audience: platform.platform_id, typ: 'at+jwt', requiredClaims: RFC9068_CLAIMS });
      expect(payload).toMatchObject({ sub: agent.agent_id, client_id: agent.api_key_id, scope: 'orders:read orders:write', svc_token_profile: 'oauth-at-jwt' });
    }
    // A requested subset (space-delimited), answered with the scope granted.
    const subset = await oauthToken({ grant_type: 'client_credentials', audience: platform.platform_id, scope: 'orders:write', client_id: agent.api_key_id, client_secret: agent.secret });
    expect(subset.body.scope).toBe('orders:write');
  });

  it('the platform middleware accepts the token (typ at+jwt matches svc_token_profile) and enforces its scopes', async () => {
    const { platform, agent } = await seedVerified(['orders:read', 'orders:write'], ['orders:read']);
    const scopesText = await (await service.fetch(`${service.publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`)).text();
    const verifier = createVerifier({ serviceUrl: service.publicUrl, scopesYaml: scopesText, revocationFeed: false, fetch: service.fetch });
    try {
      await verifier.ready();
      const issued = await oauthToken({ grant_type: 'client_credentials', audience: platform.platform_id }, { authorization: basic(agent.api_key_id, agent.secret) });
      const allowed = await verifier.authorize({ method: 'GET', path: '/orders/7', authorization: `Bearer ${issued.body.access_token}` });
      expect(allowed).toMatchObject({ ok: true, claims: { agentId: agent.agent_id, scopes: ['orders:read'] } });
      // The same claims under typ JWT would be refused: the middleware pairs typ with the profile.
      const native = await service.fetch(`${service.publicUrl}/api/v1/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': freshAddress() },
        body: JSON.stringify({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id }),
      });
      expect(await verifier.authorize({ method: 'GET', path: '/orders/7', authorization: `Bearer ${((await native.json()) as any).access_token}` })).toMatchObject({ ok: true });
    } finally {
      verifier.close();
    }
  });

  it('the middleware serves RFC 9728 metadata naming this issuer, and its 401s point to it (resource_metadata)', async () => {
    const { platform, agent, domain } = await seedVerified(['orders:read', 'orders:write'], ['orders:read']);
    const scopesYaml = await (await service.fetch(`${service.publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`)).text();
    const verifier = createVerifier({ serviceUrl: service.publicUrl, scopesYaml, revocationFeed: false, resource: `https://${domain}`, fetch: service.fetch });
    const server = http.createServer(protectNodeHandler(verifier, (req, res) => res.end(`hello ${req.agent.agentId}`)));
    const port = await freePort();
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    try {
      const platformUrl = `http://127.0.0.1:${port}`;
      const metadataResponse = await fetch(`${platformUrl}/.well-known/oauth-protected-resource`);
      expect(metadataResponse.status).toBe(200);
      const metadata = (await metadataResponse.json()) as Record<string, any>;
      expect(metadata).toEqual({
        resource: `https://${domain}`,
        authorization_servers: [service.publicUrl],
        scopes_supported: ['orders:read', 'orders:write'],
        bearer_methods_supported: ['header'],
      });
      // The discovery chain a generic client follows: resource metadata -> RFC 8414 metadata -> token.
      const server8414 = (await (await service.fetch(`${metadata.authorization_servers[0]}/.well-known/oauth-authorization-server`)).json()) as Record<string, any>;
      expect(server8414.issuer).toBe(metadata.authorization_servers[0]);
      // A domain verified a moment ago is found within about a second (the route's resource index re-reads
      // on a miss at most once a second): ask again after that. An unknown resource passes the credential
      // check and spends the key's token budget (5 here), so not faster.
      let issued = await oauthToken({ grant_type: 'client_credentials', resource: metadata.resource }, { authorization: basic(agent.api_key_id, agent.secret) });
      for (const deadline = Date.now() + 4000; issued.status === 400 && issued.body.error === 'invalid_target' && Date.now() < deadline; ) {
        await new Promise((resolve) => setTimeout(resolve, 1100));
        issued = await oauthToken({ grant_type: 'client_credentials', resource: metadata.resource }, { authorization: basic(agent.api_key_id, agent.secret) });
      }
      expect(issued.status, JSON.stringify(issued.body)).toBe(200);
      const ok = await fetch(`${platformUrl}/orders/7`, { headers: { authorization: `Bearer ${issued.body.access_token}` } });
      expect(await ok.text()).toBe(`hello ${agent.agent_id}`);

      const noToken = await fetch(`${platformUrl}/orders/7`);
      expect(noToken.status).toBe(401);
      expect(noToken.headers.get('www-authenticate')).toBe(`Bearer realm="${platform.platform_id}", resource_metadata="https://${domain}/.well-known/oauth-protected-resource"`);
      const badToken = await fetch(`${platformUrl}/orders/7`, { headers: { authorization: 'Bearer abc.def.ghi' } });
      expect(badToken.status).toBe(401);
      expect(badToken.headers.get('www-authenticate')).toContain(`resource_metadata="https://${domain}/.well-known/oauth-protected-resource"`);
      // 403 (a scope missing) is not a 401: no resource_metadata there.
      const forbidden = await fetch(`${platformUrl}/orders/7`, { method: 'DELETE', headers: { authorization: `Bearer ${issued.body.access_token}` } });
      expect(forbidden.status).toBe(403);
    } finally {
      verifier.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('a verified domain belongs to one platform (in any case): a second is refused with 409, so resource=https://<domain> never picks one of two', async () => {
    const { domain, platform } = await seedVerified();
    const twin = await admin.request('POST', '/admin/v1/platforms', { name: 'Twin', domain: domain.toUpperCase(), verification_status: 'verified', scopes: [] });
    expect(twin.status, JSON.stringify(twin.body)).toBe(409);
    expect(twin.body.error_code).toBe('conflict');
    const pending = await admin.createPlatform({ name: 'Twin', domain: domain.toUpperCase(), scopes: [] });
    const promote = await admin.request('PATCH', `/admin/v1/platforms/${pending.platform_id}`, { verification_status: 'verified' });
    expect(promote.status).toBe(409);
    expect((await admin.call('GET', `/admin/v1/platforms/${platform.platform_id}`)).verification_status).toBe('verified');
  });

  it('answers each failure with its RFC 6749 / RFC 8707 error code', async () => {
    const { platform, agent } = await seedVerified(['a:read', 'b:write'], ['a:read']);
    const post = { client_id: agent.api_key_id, client_secret: agent.secret };
    const good = { grant_type: 'client_credentials', audience: platform.platform_id };

    // invalid_client: wrong secret (Basic: 401 with a Basic challenge), unknown id, no authentication.
    const wrongBasic = await oauthToken(good, { authorization: basic(agent.api_key_id, 'wrong-secret') });
    expectOAuthError(wrongBasic, 401, 'invalid_client');
    expect(wrongBasic.headers.get('www-authenticate')).toMatch(/^Basic realm="[^"]+"/);
    const wrongPost = await oauthToken({ ...good, client_id: agent.api_key_id, client_secret: 'wrong-secret' });
    expectOAuthError(wrongPost, 401, 'invalid_client');
    expect(wrongPost.headers.get('www-authenticate')).toBeNull();
    expectOAuthError(await oauthToken({ ...good, client_id: `agnt_kid_${'0'.repeat(32)}`, client_secret: 'x' }), 401, 'invalid_client');
    expectOAuthError(await oauthToken(good), 401, 'invalid_client');
    expectOAuthError(await oauthToken(good, { authorization: 'Bearer abc' }), 401, 'invalid_client');

    // invalid_request: duplicate parameter, two authentication methods, not a form, malformed escape.
    expectOAuthError(await oauthToken(`grant_type=client_credentials&audience=${platform.platform_id}&audience=${platform.platform_id}&client_id=${post.client_id}&client_secret=${post.client_secret}`), 400, 'invalid_request');
    expectOAuthError(await oauthToken({ ...good, ...post }, { authorization: basic(agent.api_key_id, agent.secret) }), 400, 'invalid_request');
    expectOAuthError(await oauthToken(JSON.stringify({ ...good, ...post }), { 'content-type': 'application/json' }), 400, 'invalid_request');
    expectOAuthError(await oauthToken(`grant_type=client_credentials&audience=${platform.platform_id}&client_id=${post.client_id}&client_secret=%zz`), 400, 'invalid_request');
    expectOAuthError(await oauthToken({ audience: platform.platform_id, ...post }), 400, 'invalid_request');

    // unsupported_grant_type
    expectOAuthError(await oauthToken({ ...good, ...post, grant_type: 'password' }), 400, 'unsupported_grant_type');

    // invalid_scope: outside the grant, or not RFC 6749 §3.3 characters.
    expectOAuthError(await oauthToken({ ...good, ...post, scope: 'a:read b:write' }), 400, 'invalid_scope');
    expectOAuthError(await oauthToken({ ...good, ...post, scope: 'a:read "b"' }), 400, 'invalid_scope');

    // invalid_target: missing, unknown domain, not https, a fragment, platform without a grant, two names that
    // disagree (the last ones after the credential check: test/e2e/mcp-resource.test.ts).
    const other = await admin.createPlatform({ name: 'Other', scopes: [{ name: 'x' }] });
    const targets: Record<string, string>[] = [
      {},
      { resource: 'https://nowhere.example.net' },
      { resource: 'http://shop.example.com' },
      { resource: `urn:uuid:${platform.platform_id}#x` },
      { resource: 'urn:uuid:not-a-uuid' },
      { audience: 'nope' },
      { audience: other.platform_id },
      { resource: `urn:uuid:${other.platform_id}`, audience: platform.platform_id },
    ];
    for (const target of targets) {
      expectOAuthError(await oauthToken({ grant_type: 'client_credentials', ...post, ...target }), 400, 'invalid_target');
    }

    // unauthorized_client: the agent is inactive.
    await admin.patchAgent(agent.agent_id, { status: 'inactive' });
    expectOAuthError(await oauthToken({ ...good, ...post }), 400, 'unauthorized_client');
  });

  it('shares the per-key token limit with the contract endpoint: 429 with Retry-After', async () => {
    const { platform, agent } = await seedVerified();
    for (let i = 0; i < TOKEN_LIMIT - 1; i++) {
      const contract = await service.fetch(`${service.publicUrl}/api/v1/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': freshAddress() },
        body: JSON.stringify({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id }),
      });
      expect(contract.status).toBe(200);
    }
    const form = { grant_type: 'client_credentials', audience: platform.platform_id, client_id: agent.api_key_id, client_secret: agent.secret };
    expect((await oauthToken(form)).status).toBe(200);
    const limited = await oauthToken(form);
    expectOAuthError(limited, 429, 'rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });

  it('counts the OAuth door in the same token metrics as the contract door', async () => {
    const { platform, agent } = await seedVerified();
    const issuedCount = async () => {
      const text = await (await service.fetch(`${service.adminUrl}/metrics`)).text();
      return Number(/^ace_tokens_issued_total\{outcome="issued"\} (\d+)/m.exec(text)?.[1] ?? 0);
    };
    const before = await issuedCount();
    const form = { grant_type: 'client_credentials', audience: platform.platform_id, client_id: agent.api_key_id, client_secret: agent.secret };
    expect((await oauthToken(form)).status).toBe(200);
    expect(await issuedCount()).toBe(before + 1);
    const metrics = await (await service.fetch(`${service.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/route="oauth_token"/);
  });
});
