// Hostile bodies at the credential endpoints, in process: random and malformed JSON, invalid UTF-8, nesting
// bombs and prototype-pollution keys, sent through inject to the whole app on the memory ports. Every
// answer must be a well-formed contract error (or the endpoint's normal success for the seeded agent's own
// credentials), no answer a 500, and no record may change. What needs a socket or a process (framing,
// slow senders, vanishing clients, HEAD, the process surviving) is test/integration/hostile-input.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { postJson, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { contractErrorProblem, serverErrorsIn } from '../support/faults.js';
import { HOSTILE_ENV, hostileArbitraries, recordsSnapshot } from '../support/hostile-arbitraries.js';
import { inProcessApp, type InProcessApp } from '../support/in-process.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const RUNS = Number(process.env.HOSTILE_RUNS ?? 60);

describe('hostile bodies (in process)', () => {
  let service: InProcessApp;
  let platform: PlatformRecord;
  let agent: AgentCredentials;
  let before: string;

  const records = () => recordsSnapshot(service.admin, agent.agent_id);

  beforeAll(async () => {
    service = await inProcessApp({ env: HOSTILE_ENV });
    ({ platform, agent } = await service.admin.seed(['orders:read', 'orders:write']));
    before = await records();
  });
  afterAll(async () => {
    await service?.close();
  });

  const { bodyBytes, contentType } = hostileArbitraries(() => ({ agent, platform }));

  it('random, malformed and polluted bodies at the token and listing endpoints get contract answers', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('/api/v1/auth/token', '/api/v1/auth/agents/me/platforms'),
        bodyBytes,
        // Mostly JSON, so most bodies get past the media-type check into parsing and validation.
        fc.oneof({ weight: 8, arbitrary: fc.constantFrom('application/json', 'application/json; charset=utf-8') }, { weight: 2, arbitrary: contentType }),
        fc.ipV4(),
        async (endpoint, body, type, address) => {
          const answer = await service.inject({ method: 'POST', url: endpoint, headers: { 'content-type': type, 'x-forwarded-for': address }, body });
          const label = `POST ${endpoint} [${type}] ${body.toString('latin1').slice(0, 200)} -> ${answer.status} ${answer.body.slice(0, 200)}`;
          expect(answer.status, label).not.toBe(500);
          expect(answer.headers['x-request-id'], label).toMatch(REQUEST_ID);
          if (answer.status >= 400) {
            expect(contractErrorProblem(answer.status, answer.headers['content-type'], answer.body), label).toBeNull();
          } else {
            expect(answer.status, label).toBe(200);
            // Only the seeded agent's own credentials can succeed.
            const parsed = JSON.parse(body.toString('utf8'));
            expect(parsed.api_key_id).toBe(agent.api_key_id);
            expect(parsed.secret).toBe(agent.secret);
          }
        },
      ),
      { numRuns: RUNS * 2 },
    );
  });

  it('prototype-pollution keys change nothing: validation and authorisation behave as before', async () => {
    const pollute = [
      `{"__proto__":{"api_key_id":"${agent.api_key_id}","secret":"${agent.secret}","platform_id":"${platform.platform_id}","scopes":["orders:read","admin"],"status":"active","isAdmin":true}}`,
      `{"constructor":{"prototype":{"api_key_id":"${agent.api_key_id}","secret":"${agent.secret}","platform_id":"${platform.platform_id}","polluted":true}}}`,
      `{"api_key_id":"${agent.api_key_id}","secret":"nope","platform_id":"${platform.platform_id}","__proto__":{"secret":"${agent.secret}"},"constructor":{"prototype":{"secret":"${agent.secret}"}}}`,
      `{"api_key_id":"${agent.api_key_id}","secret":"${agent.secret}","platform_id":"${platform.platform_id}","scopes":["__proto__","constructor","prototype"]}`,
      `{"api_key_id":"${agent.api_key_id}","secret":"${agent.secret}","platform_id":"${platform.platform_id}","__proto__":{"scopes":["orders:write"]},"prototype":{"profile":"oauth-at-jwt"}}`,
    ];
    const post = (path: string, body: unknown) => postJson(`${service.publicUrl}${path}`, body, {}, service.fetch);
    const outcomes = [];
    for (const endpoint of ['/api/v1/auth/token', '/api/v1/auth/agents/me/platforms']) {
      for (const body of pollute) {
        const response = await post(endpoint, body);
        outcomes.push([endpoint, body.slice(0, 60), response.status]);
        if (response.status >= 400) expect(contractErrorProblem(response.status, response.headers.get('content-type') ?? undefined, response.text)).toBeNull();
      }
    }
    // The pollution never stood in for a missing own field.
    const token = (body: unknown) => post('/api/v1/auth/token', body);
    expect(outcomes[0][2]).toBe(422);
    expect(outcomes[1][2]).toBe(422);
    expect(outcomes[2][2]).toBe(401);
    expect(outcomes[3][2]).toBe(403);
    // __proto__ in JSON is an own key, ignored as an extra field: the token carries every granted scope.
    expect(outcomes[4][2]).toBe(200);
    // Canaries: no property leaked onto Object.prototype (the service runs in this very process).
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
    const empty = await token({});
    expect(empty.status).toBe(422);
    expect(empty.body.detail).toBe('api_key_id is required.');
    const noSecret = await token({ api_key_id: agent.api_key_id, platform_id: platform.platform_id });
    expect(noSecret.body.detail).toBe('secret is required.');
    expect((await post('/api/v1/auth/agents/me/platforms', {})).status).toBe(422);
    const issued = await token({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id });
    expect(issued.status).toBe(200);
    expect(Object.keys(issued.body).sort()).toEqual(['access_token', 'expires_in', 'token_type']);
    const claims = JSON.parse(Buffer.from(issued.body.access_token.split('.')[1], 'base64url').toString());
    expect(claims.scope).toBe('orders:read orders:write');
    expect(claims).not.toHaveProperty('polluted');
    expect(claims).not.toHaveProperty('isAdmin');
    // And the admin API refuses pollution without the token like anything else.
    const adminPolluted = await service.injectAdmin({ method: 'POST', url: '/admin/v1/agents', headers: { 'content-type': 'application/json' }, body: '{"__proto__":{"authorization":"yes"},"name":"x"}' });
    expect(adminPolluted.status).toBe(401);
  });

  it('no 500 was answered and no record changed', async () => {
    expect(await records()).toBe(before);
    const metrics = await service.injectAdmin({ method: 'GET', url: '/metrics' });
    expect(serverErrorsIn(metrics.body)).toEqual([]);
  });
});
