// The admin API's refusals, in process: bad query parameters of the audit trail's reader and bad bodies of
// the write routes get 422 naming the parameter or field, in the contract Error shape, and change nothing;
// the bearer check and 405 come first. Requests go through inject to the whole app on the memory ports.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inProcessApp, type InProcessApp } from '../support/in-process.js';

describe('admin API validation (in process)', () => {
  let service: InProcessApp;
  let agentId: string;
  let platformId: string;

  /** `token` '' sends no Authorization. */
  const call = async (method: string, url: string, body?: unknown, token = service.adminToken) => {
    const headers: Record<string, string> = { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) };
    const answer = await service.injectAdmin({ method, url, headers, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body) });
    return { status: answer.status, body: answer.body ? answer.json<any>() : undefined, headers: answer.headers };
  };
  const expectValidation = (answer: { status: number; body: any }, name: string, what: string) => {
    expect(answer.status, what).toBe(422);
    expect(Object.keys(answer.body).sort(), what).toEqual(['detail', 'error_code']);
    expect(answer.body.error_code, what).toBe('validation_error');
    expect(answer.body.detail.startsWith(name), `${what}: ${answer.body.detail}`).toBe(true);
  };

  beforeAll(async () => {
    service = await inProcessApp();
    const { platform, agent } = await service.admin.seed(['orders:read']);
    platformId = platform.platform_id;
    agentId = agent.agent_id;
  });
  afterAll(async () => {
    await service?.close();
  });

  it('GET /admin/v1/events: a bad parameter gets 422 naming it', async () => {
    const cases: [string, string][] = [
      ['?type=token.stolen', 'type'],
      ['?type=token.issued,', 'type'],
      ['?agent_id=42', 'agent_id'],
      ['?platform_id=urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8', 'platform_id'],
      ['?since=yesterday', 'since'],
      ['?until=2026-13-45', 'until'],
      ['?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z', 'until'],
      ['?limit=0', 'limit'],
      ['?limit=1001', 'limit'],
      ['?limit=ten', 'limit'],
      ['?cursor=nope', 'cursor'],
      ['?cursor=' + Buffer.from('1.not-a-uuid').toString('base64url'), 'cursor'],
      ['?agent=' + crypto.randomUUID(), 'agent'],
      ['?limit=1&limit=2', 'limit'],
    ];
    for (const [query, name] of cases) expectValidation(await call('GET', `/admin/v1/events${query}`), `${name} `, query);
    expect((await call('GET', '/admin/v1/events', undefined, '')).status).toBe(401);
    expect((await call('POST', '/admin/v1/events')).status).toBe(405);
    expect((await call('GET', '/admin/v1/events?limit=5')).status).toBe(200);
  });

  it('write routes: a bad body gets 422 naming the field, and changes nothing', async () => {
    const before = JSON.stringify([(await call('GET', '/admin/v1/agents')).body, (await call('GET', '/admin/v1/platforms')).body]);
    const cases: [string, string, unknown, string][] = [
      ['POST', '/admin/v1/agents', {}, 'name'],
      ['POST', '/admin/v1/agents', { name: 'a\u001b[31m' }, 'name'],
      ['POST', '/admin/v1/platforms', { name: 'x' }, 'scopes'],
      ['POST', '/admin/v1/platforms', { name: 'x', scopes: [{ name: 'a' }], routes: [{ method: 'GET', path: '/a', scopes: ['b'] }] }, 'routes'],
      ['PATCH', `/admin/v1/agents/${agentId}`, { status: 'sleeping' }, 'status'],
      ['PATCH', `/admin/v1/platforms/${platformId}`, { verification_status: 'maybe' }, 'verification_status'],
      ['PUT', `/admin/v1/agents/${agentId}/grants/${platformId}`, { scopes: ['orders:delete'] }, 'scopes'],
    ];
    for (const [method, url, body, field] of cases) expectValidation(await call(method, url, body), field, `${method} ${url} ${JSON.stringify(body)}`);
    expect(JSON.stringify([(await call('GET', '/admin/v1/agents')).body, (await call('GET', '/admin/v1/platforms')).body])).toBe(before);
  });

  it('the bearer check comes before validation; a malformed id is answered like an unknown one', async () => {
    const unauthorised = await call('POST', '/admin/v1/agents', { name: '' }, 'wrong');
    expect(unauthorised.status).toBe(401);
    expect(unauthorised.headers['www-authenticate']).toBe('Bearer realm="admin"');
    expect((await call('GET', '/admin/v1/agents/not-a-uuid')).status).toBe(404);
    expect((await call('GET', `/admin/v1/agents/${crypto.randomUUID()}`)).status).toBe(404);
    const notJson = await call('POST', '/admin/v1/agents', '{"name":');
    expect(notJson.status).toBe(400);
    expect(notJson.body.error_code).toBe('invalid_json');
  });
});
