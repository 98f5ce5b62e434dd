// Every admin string that is stored and echoed (names, descriptions, resource identifiers, jwks_uri, JWK
// members, issuer, audience, subject) refuses control, bidirectional and invisible characters with 422 in the
// contract's Error shape, and nothing changes: an operator's terminal or console shows what is stored.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair } from 'jose';
import { AdminClient } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';

const ISSUER = 'https://ace.test';
const UNSAFE = { 'U+202E': '\u202E', BEL: '\u0007', ESC: '\u001B' };

let service: ServiceHandle;
let admin: AdminClient;
beforeAll(async () => {
  service = await startService({ mode: 'embedded', env: { ISSUER } });
  admin = new AdminClient(service);
}, 90_000);
afterAll(async () => {
  await service?.dispose();
});

describe('admin strings with control, bidirectional or invisible characters', () => {
  it('are refused with 422 validation_error naming the field, for every stored field, and nothing changes', async () => {
    const platform = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'read' }] });
    const agent = await admin.call('POST', '/admin/v1/agents', { name: 'keyed', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [] } }, 201);
    const jwk = { ...(await exportJWK((await generateKeyPair('ES256')).publicKey)), kid: 'k1', alg: 'ES256' };
    const issuer = await admin.call('POST', '/admin/v1/workload-issuers', { issuer: 'https://issuer.example', audience: ISSUER, jwks: { keys: [jwk] } }, 201);
    const snapshot = async () => ({
      platforms: (await admin.request('GET', '/admin/v1/platforms')).body,
      agents: (await admin.request('GET', '/admin/v1/agents')).body,
      keys: (await admin.request('GET', `/admin/v1/agents/${agent.agent_id}/keys`)).body,
      issuers: (await admin.request('GET', '/admin/v1/workload-issuers')).body,
      bindings: (await admin.request('GET', `/admin/v1/workload-issuers/${issuer.issuer_id}/bindings`)).body,
    });
    const before = await snapshot();

    for (const [label, c] of Object.entries(UNSAFE)) {
      const cases: [string, string, unknown, RegExp][] = [
        ['POST', '/admin/v1/platforms', { name: `Shop${c}`, scopes: [] }, /name/],
        ['POST', '/admin/v1/platforms', { name: 'Shop2', scopes: [{ name: 'read', description: `reads${c}` }] }, /scopes\[0\]\.description/],
        ['POST', '/admin/v1/platforms', { name: 'Shop3', scopes: [], resources: [`https://api.example.com/mcp${c}`] }, /resources\[0\]/],
        ['PATCH', `/admin/v1/platforms/${platform.platform_id}`, { name: `Shop${c}` }, /name/],
        ['PATCH', `/admin/v1/platforms/${platform.platform_id}`, { scopes: [{ name: 'read', description: `x${c}` }] }, /description/],
        ['PATCH', `/admin/v1/platforms/${platform.platform_id}`, { resources: [`https://api.example.com/${c}mcp`] }, /resources\[0\]/],
        ['POST', '/admin/v1/agents', { name: `bot${c}` }, /name/],
        ['PATCH', `/admin/v1/agents/${agent.agent_id}`, { name: `bot${c}` }, /name/],
        ['POST', '/admin/v1/agents', { name: 'bot', token_endpoint_auth_method: 'private_key_jwt', jwks_uri: `https://issuer.example/${c}jwks` }, /jwks_uri/],
        ['POST', '/admin/v1/agents', { name: 'bot', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [{ ...jwk, kid: `k${c}` }] } }, /kid/],
        ['POST', '/admin/v1/agents', { name: 'bot', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [{ ...jwk, use: `sig${c}` }] } }, /jwks/],
        ['POST', `/admin/v1/agents/${agent.agent_id}/keys`, { ...jwk, kid: `k${c}` }, /kid/],
        ['POST', `/admin/v1/agents/${agent.agent_id}/keys`, { ...jwk, alg: `ES256${c}` }, /alg/],
        ['POST', '/admin/v1/workload-issuers', { issuer: `https://issuer.example${c}`, audience: ISSUER, jwks: { keys: [jwk] } }, /issuer/],
        ['POST', '/admin/v1/workload-issuers', { issuer: 'https://other.example', audience: `${ISSUER}${c}`, jwks: { keys: [jwk] } }, /audience/],
        ['POST', '/admin/v1/workload-issuers', { issuer: 'https://other.example', audience: ISSUER, jwks_uri: `https://other.example/jwks${c}` }, /jwks_uri/],
        ['POST', `/admin/v1/workload-issuers/${issuer.issuer_id}/bindings`, { subject: `system:serviceaccount:ns:${c}bot`, agent_id: agent.agent_id }, /subject/],
      ];
      for (const [method, path, body, field] of cases) {
        const answer = await admin.request(method, path, body);
        const what = `${label} ${method} ${path} ${JSON.stringify(body).slice(0, 120)}`;
        expect(answer.status, what).toBe(422);
        expect(answer.body.error_code, what).toBe('validation_error');
        expect(typeof answer.body.detail, what).toBe('string');
        expect(answer.body.detail, what).toMatch(field);
      }
    }
    expect(await snapshot()).toEqual(before);
  });
});
