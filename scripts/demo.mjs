// npm run demo: against a running service (npm start), creates a platform, an agent and a grant through
// the admin API, exchanges the agent's credentials for a token, and verifies it with the JWKS as a
// platform would. Settings: ACE_PUBLIC_URL, ACE_ADMIN_URL, ADMIN_TOKEN (else DATA_DIR/admin-token).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createRemoteJWKSet, jwtVerify } from 'jose';

const publicUrl = process.env.ACE_PUBLIC_URL ?? 'http://127.0.0.1:8080';
const adminUrl = process.env.ACE_ADMIN_URL ?? 'http://127.0.0.1:8081';
const adminToken = process.env.ADMIN_TOKEN ?? readFileSync(path.join(process.env.DATA_DIR ?? './data', 'admin-token'), 'utf8').trim();

async function call(base, method, route, body, headers = {}) {
  const response = await fetch(base + route, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${route} -> ${response.status} ${text}`);
  return JSON.parse(text);
}
const admin = (method, route, body) => call(adminUrl, method, route, body, { authorization: `Bearer ${adminToken}` });

const platform = await admin('POST', '/admin/v1/platforms', {
  name: 'Demo Shop',
  domain: 'shop.example.com',
  verification_status: 'verified',
  scopes: [{ name: 'orders:read', description: 'Read orders' }, { name: 'orders:write', description: 'Create orders' }],
  routes: [
    { method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] },
    { method: 'POST', path: '/orders', scopes: ['orders:write'] },
  ],
});
console.log('platform', platform.platform_id);
const agent = await admin('POST', '/admin/v1/agents', { name: 'demo-agent' });
console.log('agent   ', agent.agent_id, agent.api_key_id, '(secret shown once, not printed here)');
await admin('PUT', `/admin/v1/agents/${agent.agent_id}/grants/${platform.platform_id}`, { scopes: ['orders:read'] });

const listing = await call(publicUrl, 'POST', '/api/v1/auth/agents/me/platforms', { api_key_id: agent.api_key_id, secret: agent.secret });
console.log('listing ', JSON.stringify(listing.platforms));
const token = await call(publicUrl, 'POST', '/api/v1/auth/token', {
  api_key_id: agent.api_key_id,
  secret: agent.secret,
  platform_id: platform.platform_id,
});
const jwks = createRemoteJWKSet(new URL('/.well-known/jwks.json', publicUrl));
const { payload, protectedHeader } = await jwtVerify(token.access_token, jwks, { audience: platform.platform_id });
console.log('token   ', JSON.stringify(protectedHeader), JSON.stringify(payload));
const scopeFile = await fetch(`${publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`).then((r) => r.text());
console.log('scopes.yaml\n' + scopeFile);
