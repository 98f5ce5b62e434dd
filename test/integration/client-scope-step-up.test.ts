// Scope step-up (issue 40 item 5; RFC 6750 §3.1, the MCP authorization spec): a platform's 403 with
// error="insufficient_scope" makes the agent client ask for one new token, so a grant the operator widened
// reaches a running agent on its next request instead of after the token's 15 minutes. Bounded: a 403 that
// stays costs at most one token request per token every few seconds, and the platform's answer stands.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type ServiceHandle } from '../support/service.js';
import { AdminClient, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { waitFor } from '../../kit/wait.js';
import { AgentClient } from '../../packages/client/src/index.js';
import { insufficientScope } from '../../packages/client/src/agent-client.js';
import { createVerifier, protectNodeHandler } from '../../packages/middleware/src/index.js';

let service: ServiceHandle;
let admin: AdminClient;
let shop: PlatformRecord;
let shopUrl: string;
let server: http.Server;

beforeAll(async () => {
  service = await startService({ mode: 'real' }); // default token lifetime: only a step-up brings a new one
  admin = new AdminClient(service);
  shop = await admin.createPlatform({
    name: 'Shop',
    scopes: [{ name: 'orders:read' }, { name: 'orders:write' }, { name: 'orders:delete' }],
    routes: [
      { method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] },
      { method: 'POST', path: '/orders', scopes: ['orders:write'] },
      { method: 'DELETE', path: '/orders/{id}', scopes: ['orders:delete'] },
    ],
  });
  const scopesYaml = await (await fetch(`${service.publicUrl}/api/v1/platforms/${shop.platform_id}/scopes.yaml`)).text();
  const verifier = createVerifier({ serviceUrl: service.publicUrl, scopesYaml, feedToken: await admin.feedToken(shop.platform_id) });
  server = http.createServer(protectNodeHandler(verifier, (req, res) => res.end(JSON.stringify({ scopes: req.agent!.scopes }))));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  shopUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 120_000);

afterAll(async () => {
  server?.close();
  await service?.dispose();
});

async function agentClient(agent: AgentCredentials, scopes?: string[]) {
  let tokenRequests = 0;
  const client = await AgentClient.start({
    serviceUrl: service.publicUrl,
    apiKeyId: agent.api_key_id,
    secret: agent.secret,
    platforms: { [shopUrl]: shop.platform_id },
    ...(scopes ? { scopes: { [shop.platform_id]: scopes } } : {}),
    fetch: (input, init) => {
      if (new URL(input instanceof Request ? input.url : String(input)).pathname === '/api/v1/auth/token') tokenRequests++;
      return fetch(input, init);
    },
  });
  return { client, tokenRequests: () => tokenRequests };
}

describe('scope step-up in the agent client', { timeout: 60_000 }, () => {
  it('a grant widened while the agent runs is used on a next request after the 403, without a token request per 403', async () => {
    const agent = await admin.createAgent('step-up');
    await admin.grant(agent.agent_id, shop.platform_id, ['orders:read']);
    const { client, tokenRequests } = await agentClient(agent);
    expect((await client.fetch(`${shopUrl}/orders/1`)).status).toBe(200);
    expect(tokenRequests()).toBe(1);

    // Not granted: the platform's 403 stands; one renewal was tried, and 403s that follow at once ask for nothing.
    const refused = await client.fetch(`${shopUrl}/orders/1`, { method: 'DELETE' });
    expect(refused.status).toBe(403);
    expect(insufficientScope(refused)).toEqual(['orders:delete']);
    expect(tokenRequests()).toBe(2);
    for (let i = 0; i < 5; i++) expect((await client.fetch(`${shopUrl}/orders/1`, { method: 'DELETE' })).status).toBe(403);
    expect(tokenRequests()).toBe(2);

    await admin.grant(agent.agent_id, shop.platform_id, ['orders:read', 'orders:delete']);
    const started = Date.now();
    await waitFor('the widened grant used', async () => (await client.fetch(`${shopUrl}/orders/1`, { method: 'DELETE' })).status === 200, 30_000, 250);
    // One token request per replacement interval (5 s) at most while waiting, and the agent kept its other scopes.
    expect(tokenRequests() - 2).toBeLessThanOrEqual(1 + Math.ceil((Date.now() - started) / 5000));
    expect(await (await client.fetch(`${shopUrl}/orders/1`)).json()).toEqual({ scopes: ['orders:delete', 'orders:read'].sort() });
  });

  it('an agent asking for a subset adds the scope the 403 named, when its grant holds it', async () => {
    const agent = await admin.createAgent('step-up-subset');
    await admin.grant(agent.agent_id, shop.platform_id, ['orders:read', 'orders:write']);
    const { client, tokenRequests } = await agentClient(agent, ['orders:read']);
    expect(await (await client.fetch(`${shopUrl}/orders/1`)).json()).toEqual({ scopes: ['orders:read'] });
    const created = await client.fetch(`${shopUrl}/orders`, { method: 'POST', body: '{}' });
    expect(created.status).toBe(200);
    expect(tokenRequests()).toBe(2);
    expect(await created.json()).toEqual({ scopes: ['orders:read', 'orders:write'] });
  });

  it('a scope outside the grant: the service refuses the wider request, the platform\'s 403 is returned, and the agent keeps its token', async () => {
    const agent = await admin.createAgent('step-up-outside');
    await admin.grant(agent.agent_id, shop.platform_id, ['orders:read']);
    const { client, tokenRequests } = await agentClient(agent, ['orders:read']);
    expect((await client.fetch(`${shopUrl}/orders/1`)).status).toBe(200);
    const refused = await client.fetch(`${shopUrl}/orders/1`, { method: 'DELETE' });
    expect(refused.status).toBe(403);
    expect(refused.headers.get('www-authenticate')).toMatch(/insufficient_scope/);
    expect(tokenRequests()).toBe(2);
    // What it may do still works, with the subset it asked for.
    expect(await (await client.fetch(`${shopUrl}/orders/1`)).json()).toEqual({ scopes: ['orders:read'] });
  });
});
