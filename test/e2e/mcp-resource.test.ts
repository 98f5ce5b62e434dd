// MCP-ready from both ends: a platform registers the resource identifiers its servers answer as (RFC 8707 /
// RFC 9728); /oauth2/token issues tokens whose aud names the resource; the official MCP TypeScript SDK,
// unpatched, discovers through the middleware's RFC 9728 metadata, gets a token with its client-credentials
// provider and calls a tool on an MCP server behind the middleware, whose handler reads `extra.authInfo`
// with no glue (Express: examples/mcp-server/server.mjs; Hono over the Fetch adapter). Clients we did not
// write check the token the way resource servers do: jose, oauth4webapi, openid-client v6.
// Black box over HTTP against Postgres + Redis.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import express from 'express';
import { createLocalJWKSet, createRemoteJWKSet, jwtVerify, type JSONWebKeySet } from 'jose';
import * as oauth from 'oauth4webapi';
import * as openid from 'openid-client';
import { Hono } from 'hono';
import { serve, type ServerType } from '@hono/node-server';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import Fastify from 'fastify';
import { createVerifier, expressRouteGuard, honoAgentAuth, protectNodeHandler, type AgentEnv, type Verifier } from '@agent-credential-exchange/middleware';
import { fastifyAgentAuth } from '@agent-credential-exchange/middleware/fastify';
import { AdminClient, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { freePort } from '../../kit/ports.js';
import { startService, type ServiceHandle } from '../support/service.js';
// @ts-expect-error: a plain ESM example without types (what a user copies)
import { mcpApp } from '../../examples/mcp-server/server.mjs';

const HTTPS_RESOURCE = `https://mcp-${crypto.randomUUID().slice(0, 8)}.example.com/mcp`;

describe('MCP: resource identifiers, aud, and the official SDK end to end', () => {
  let service: ServiceHandle;
  let admin: AdminClient;
  let platform: PlatformRecord;
  let agent: AgentCredentials;
  let loopbackResource: string;
  let expressPort: number;
  let scopesYaml: string;
  const closers: (() => Promise<unknown> | unknown)[] = [];

  beforeAll(async () => {
    service = await startService({ mode: 'real' });
    admin = new AdminClient(service);
    expressPort = await freePort();
    loopbackResource = `http://127.0.0.1:${expressPort}/mcp`;
    platform = (await admin.createPlatform({
      name: 'MCP shop',
      scopes: [{ name: 'mcp:call' }, { name: 'orders:read' }],
      routes: ['POST', 'GET', 'DELETE'].map((method) => ({ method, path: '/mcp', scopes: ['mcp:call'] })).concat([{ method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] }]),
      // Any spelling; stored in normal form (scheme and host lower case, no default port, no trailing slash).
      resources: [`HTTP://127.0.0.1:${expressPort}/mcp/`, HTTPS_RESOURCE.replace('https://', 'HTTPS://').replace('.com/', '.com:443/')],
    }));
    agent = await admin.createAgent('mcp-agent');
    await admin.grant(agent.agent_id, platform.platform_id, ['mcp:call', 'orders:read']);
    scopesYaml = await (await fetch(`${service.publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`)).text();
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
    await service?.dispose();
  });

  const verifierFor = (resource: string): Verifier => {
    const verifier = createVerifier({ serviceUrl: service.publicUrl, scopesYaml, revocationFeed: false, resource });
    closers.push(() => verifier.close());
    return verifier;
  };
  const listen = async (server: http.Server, port = 0): Promise<number> => {
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    closers.push(() => new Promise((resolve) => server.close(resolve)));
    return (server.address() as AddressInfo).port;
  };
  const tokenFor = async (resource: string) => {
    const response = await fetch(`${service.publicUrl}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: agent.api_key_id, client_secret: agent.secret, resource }).toString(),
    });
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };
  /** An MCP client of the official SDK, unpatched: client credentials (SEP-1046), discovery from the 401. */
  const mcpClient = async (url: string, fetchFn?: typeof fetch) => {
    const authProvider = new ClientCredentialsProvider({ clientId: agent.api_key_id, clientSecret: agent.secret, expectedIssuer: service.publicUrl });
    const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider, ...(fetchFn ? { fetch: fetchFn } : {}) });
    const client = new Client({ name: 'ace-test', version: '1.0.0' });
    await client.connect(transport);
    closers.push(() => client.close());
    return { client, authProvider };
  };

  it('stores resources in normal form, refuses one another platform holds (409) or that is not https/loopback (422)', async () => {
    expect(platform.resources).toEqual([loopbackResource, HTTPS_RESOURCE]);
    const listed = await admin.call('GET', '/admin/v1/platforms');
    expect(listed.platforms.find((p: { platform_id: string }) => p.platform_id === platform.platform_id).resources).toEqual([loopbackResource, HTTPS_RESOURCE]);
    const taken = await admin.request('POST', '/admin/v1/platforms', { name: 'Thief', scopes: [], resources: [`https://${new URL(HTTPS_RESOURCE).host.toUpperCase()}/mcp`] });
    expect(taken.status, JSON.stringify(taken.body)).toBe(409);
    expect(taken.body.error_code).toBe('conflict');
    // Equivalent spellings (RFC 3986 §6.2.2, the FQDN dot) name the same resource: a conflict too.
    const host = new URL(HTTPS_RESOURCE).host;
    for (const same of [`https://${host}/%6Dcp`, `https://${host}/mc%70`, `https://${host}./mcp`]) {
      const again = await admin.request('POST', '/admin/v1/platforms', { name: 'Thief', scopes: [], resources: [same] });
      expect(again.status, same).toBe(409);
      expect(again.body.error_code).toBe('conflict');
    }
    for (const bad of [`https://${host}/mcp%2F`, `https://${host}/mcp;x`, 'http://mcp.example.com/mcp', 'https://mcp.example.com/mcp#frag', '/mcp', 'https://u:p@mcp.example.com/', 'https://mcp.example.com/?q=1']) {
      const refused = await admin.request('POST', '/admin/v1/platforms', { name: 'Bad', scopes: [], resources: [bad] });
      expect(refused.status, bad).toBe(422);
      expect(refused.body.detail).toMatch(/^resources\[0\] /);
    }
    // The scope file tells the middleware which resources the service issues tokens for.
    expect(scopesYaml).toContain(`"${HTTPS_RESOURCE}"`);
  });

  it('issues an oauth-at-jwt token whose aud is [resource, platform_id]: jose and oauth4webapi accept it with the resource as audience', async () => {
    const issued = await tokenFor(`${HTTPS_RESOURCE}/`);
    expect(issued.status, JSON.stringify(issued.body)).toBe(200);
    const token = issued.body.access_token as string;
    const keys = createLocalJWKSet((await (await fetch(`${service.publicUrl}/.well-known/jwks.json`)).json()) as JSONWebKeySet);
    const { payload } = await jwtVerify(token, keys, { audience: HTTPS_RESOURCE, typ: 'at+jwt', issuer: service.publicUrl });
    expect(payload.aud).toEqual([HTTPS_RESOURCE, platform.platform_id]);

    // oauth4webapi: a resource server validating an RFC 9068 token, its own identifier as the audience.
    const issuer = new URL(service.publicUrl);
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', [oauth.allowInsecureRequests]: true }));
    const request = new Request(loopbackResource, { headers: { authorization: `Bearer ${token}` } });
    const claims = await oauth.validateJwtAccessToken(as, request, HTTPS_RESOURCE, { [oauth.allowInsecureRequests]: true });
    expect(claims).toMatchObject({ sub: agent.agent_id, client_id: agent.api_key_id, aud: [HTTPS_RESOURCE, platform.platform_id] });
    // ... and refuses it for another resource.
    await expect(oauth.validateJwtAccessToken(as, request, 'https://elsewhere.example.com/mcp', { [oauth.allowInsecureRequests]: true })).rejects.toThrow();

    // The contract's profile stays as it was: aud the platform id alone.
    const native = await fetch(`${service.publicUrl}/api/v1/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id }),
    });
    const nativeToken = ((await native.json()) as { access_token: string }).access_token;
    expect((await jwtVerify(nativeToken, keys)).payload.aud).toBe(platform.platform_id);
  });

  it('openid-client v6 gets a token with resource = the MCP URL', async () => {
    const config = await openid.discovery(new URL(service.publicUrl), agent.api_key_id, agent.secret, openid.ClientSecretBasic(agent.secret), {
      execute: [openid.allowInsecureRequests],
      algorithm: 'oauth2',
    });
    const tokens = await openid.clientCredentialsGrant(config, { resource: loopbackResource, scope: 'mcp:call' });
    expect(tokens.token_type.toLowerCase()).toBe('bearer');
    const { payload } = await jwtVerify(tokens.access_token, createRemoteJWKSet(new URL(`${service.publicUrl}/.well-known/jwks.json`)), { audience: loopbackResource, typ: 'at+jwt' });
    expect(payload).toMatchObject({ aud: [loopbackResource, platform.platform_id], scope: 'mcp:call' });
  });

  it('the MCP SDK calls a tool on an MCP server behind expressAgentAuth (loopback http resource): extra.authInfo, no glue', async () => {
    const verifier = verifierFor(loopbackResource);
    await verifier.ready();
    await listen(http.createServer(mcpApp(verifier)), expressPort);
    // Without a token: 401 naming the RFC 9728 metadata, which names the service.
    const bare = await fetch(loopbackResource, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(bare.status).toBe(401);
    expect(bare.headers.get('www-authenticate')).toContain(`resource_metadata="http://127.0.0.1:${expressPort}/.well-known/oauth-protected-resource/mcp"`);

    const { client, authProvider } = await mcpClient(loopbackResource);
    const result = await client.callTool({ name: 'whoami', arguments: {} });
    expect(result.structuredContent).toEqual({
      agent_id: agent.agent_id,
      platform_id: platform.platform_id,
      client_id: agent.api_key_id,
      scopes: ['mcp:call', 'orders:read'],
      resource: loopbackResource,
    });
    expect(authProvider.tokens()?.access_token).toEqual(expect.any(String));
  });

  it('the MCP SDK calls a tool on a Hono MCP server (Fetch adapter) as https://host/mcp, reached through a fetch remap', async () => {
    const verifier = verifierFor(HTTPS_RESOURCE);
    await verifier.ready();
    const app = new Hono<AgentEnv>();
    app.use('*', honoAgentAuth(verifier));
    app.all('/mcp', async (c) => {
      const server = new McpServer({ name: 'whoami', version: '1.0.0' });
      server.registerTool('whoami', { description: 'Who called' }, async (extra) => ({
        content: [{ type: 'text', text: 'ok' }],
        structuredContent: { agent_id: extra.authInfo?.extra?.agentId, resource: extra.authInfo?.resource?.href, expires_at: extra.authInfo?.expiresAt },
      }));
      const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      await server.connect(transport);
      return transport.handleRequest(c.req.raw, { authInfo: c.get('auth') });
    });
    const port = await freePort();
    const server: ServerType = serve({ fetch: app.fetch, port, hostname: '127.0.0.1' });
    closers.push(() => new Promise((resolve) => server.close(resolve)));
    const origin = new URL(HTTPS_RESOURCE).origin;
    // The agent knows only https://mcp-….example.com/mcp; the remap stands in for DNS and TLS.
    const remap: typeof fetch = (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      return fetch(url.startsWith(origin) ? `http://127.0.0.1:${port}${url.slice(origin.length)}` : url, init);
    };
    const { client } = await mcpClient(HTTPS_RESOURCE, remap);
    const result = await client.callTool({ name: 'whoami', arguments: {} });
    expect(result.structuredContent).toMatchObject({ agent_id: agent.agent_id, resource: HTTPS_RESOURCE, expires_at: expect.any(Number) });
  });

  it('the Express route guard and Fastify serve the RFC 9728 metadata (resource, no jwks_uri, scopes from the scope file, bearer methods)', async () => {
    const verifier = verifierFor(HTTPS_RESOURCE);
    const guard = expressRouteGuard(verifier);
    const app = express();
    app.get('/.well-known/oauth-protected-resource/mcp', guard);
    app.get('/orders/:id', guard, (_req, res) => void res.send('ok'));
    const port = await listen(http.createServer(app));
    const response = await fetch(`http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      resource: HTTPS_RESOURCE,
      authorization_servers: [service.publicUrl],
      scopes_supported: ['mcp:call', 'orders:read'],
      bearer_methods_supported: ['header'],
    });
    const challenge = await fetch(`http://127.0.0.1:${port}/orders/1`);
    expect(challenge.status).toBe(401);
    expect(challenge.headers.get('www-authenticate')).toContain(`resource_metadata="${new URL(HTTPS_RESOURCE).origin}/.well-known/oauth-protected-resource/mcp"`);

    // Fastify: the hook runs for a path no route declares (its 404) and answers the metadata there too.
    const fastify = Fastify();
    await fastify.register(fastifyAgentAuth(verifier));
    fastify.get('/orders/:id', async () => 'ok');
    await fastify.listen({ port: 0, host: '127.0.0.1' });
    closers.push(() => fastify.close());
    const fastifyPort = (fastify.server.address() as AddressInfo).port;
    const fromFastify = await fetch(`http://127.0.0.1:${fastifyPort}/.well-known/oauth-protected-resource/mcp`);
    expect(fromFastify.status).toBe(200);
    expect(((await fromFastify.json()) as { resource: string }).resource).toBe(HTTPS_RESOURCE);
  });

  it('ready() rejects a resource option the service issues no token for; a token for another platform resource is refused', async () => {
    const stranger = createVerifier({ serviceUrl: service.publicUrl, scopesYaml, revocationFeed: false, resource: 'https://unregistered.example.com/mcp' });
    closers.push(() => stranger.close());
    await expect(stranger.ready()).rejects.toMatchObject({ code: 'ERR_ACE_RESOURCE_NOT_REGISTERED' });
    expect(() => createVerifier({ serviceUrl: service.publicUrl, scopesYaml, revocationFeed: false, resource: 'http://mcp.example.com/mcp' })).toThrow(/https/);

    // Another platform's resource: its token does not pass here, though signed by the same service.
    const other = await admin.createPlatform({ name: 'Other', scopes: [{ name: 'mcp:call' }], resources: ['https://other.example.com/mcp'] });
    await admin.grant(agent.agent_id, other.platform_id, ['mcp:call']);
    // The token endpoint's resource index re-reads on a miss at most once a second: a resource registered
    // a moment ago is found on the next try after that.
    let foreign = await tokenFor('https://other.example.com/mcp');
    for (const deadline = Date.now() + 4000; foreign.status === 400 && Date.now() < deadline; foreign = await tokenFor('https://other.example.com/mcp')) {
      await new Promise((resolve) => setTimeout(resolve, 1100));
    }
    expect(foreign.status, JSON.stringify(foreign.body)).toBe(200);
    const verifier = verifierFor(HTTPS_RESOURCE);
    expect(await verifier.authorize({ method: 'POST', path: '/mcp', authorization: `Bearer ${foreign.body.access_token}` })).toMatchObject({ ok: false, status: 401 });
    const own = await tokenFor(loopbackResource);
    expect(await verifier.authorize({ method: 'POST', path: '/mcp', authorization: `Bearer ${own.body.access_token}` })).toMatchObject({
      ok: true,
      claims: { platformId: platform.platform_id, resource: loopbackResource },
    });
    // node:http: the listener finds the MCP SDK's AuthInfo on req.auth as well (its Node transport reads it there).
    const port = await listen(
      http.createServer(protectNodeHandler(verifier, (req, res) => res.end(JSON.stringify({ clientId: req.auth?.clientId, resource: req.auth?.resource?.href, extra: req.auth?.extra })))),
    );
    const seen = await fetch(`http://127.0.0.1:${port}/mcp`, { method: 'POST', headers: { authorization: `Bearer ${own.body.access_token}` } });
    expect(await seen.json()).toEqual({ clientId: agent.api_key_id, resource: loopbackResource, extra: { agentId: agent.agent_id, platformId: platform.platform_id, tokenId: expect.any(String) } });
  });

  it('an unknown resource is refused like a wrong secret: the same answer with or without it, after the credential check', async () => {
    const ask = (resource: string, secret: string) =>
      fetch(`${service.publicUrl}/oauth2/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'client_credentials', client_id: agent.api_key_id, client_secret: secret, resource }).toString(),
      }).then(async (r) => ({ status: r.status, body: await r.text() }));
    const unknown = 'https://unknown-domain.example.org';
    // Without the secret: the known and the unknown resource get byte-identical 401s.
    expect(await ask(unknown, 'wrong-secret')).toEqual(await ask(HTTPS_RESOURCE, 'wrong-secret'));
    expect((await ask(unknown, 'wrong-secret')).status).toBe(401);
    // With it: an unknown resource is answered as a platform without a grant.
    const noGrant = await admin.createPlatform({ name: 'No grant', scopes: [{ name: 'x' }], resources: ['https://nogrant.example.com/mcp'] });
    expect(noGrant.platform_id).toEqual(expect.any(String));
    const unknownAnswer = await ask(unknown, agent.secret);
    expect(unknownAnswer.status).toBe(400);
    expect(JSON.parse(unknownAnswer.body).error).toBe('invalid_target');
    expect(await ask('https://nogrant.example.com/mcp', agent.secret)).toEqual(unknownAnswer);
  });
});
