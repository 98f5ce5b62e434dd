// npm run demo: against a running service (npm start), creates a platform, an agent and a grant through
// the admin API, exchanges the agent's credentials for a token, and verifies it with the JWKS as a
// platform would. Settings, the same names as `ace` and examples/:
//   ACE_PUBLIC_URL   public listener  (default http://localhost:8080, the service's default issuer)
//   ACE_ADMIN_URL    admin listener   (default http://127.0.0.1:8081)
//   ACE_ADMIN_TOKEN  admin token      (default: read from $DATA_DIR/admin-token, DATA_DIR default ./data)
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createRemoteJWKSet, jwtVerify } from 'jose';

// Older names, refused rather than ignored: a URL set under one would otherwise be silently replaced by a default.
for (const [old, now] of [['SERVICE_URL', 'ACE_PUBLIC_URL'], ['ADMIN_URL', 'ACE_ADMIN_URL']]) {
  if (process.env[old] && !process.env[now]) throw new Error(`${old} is no longer read: set ${now}`);
}
const publicUrl = (process.env.ACE_PUBLIC_URL || 'http://localhost:8080').replace(/\/+$/, '');
const adminUrl = (process.env.ACE_ADMIN_URL || 'http://127.0.0.1:8081').replace(/\/+$/, '');
const tokenFile = path.join(process.env.DATA_DIR || './data', 'admin-token');
function adminToken() {
  if (process.env.ACE_ADMIN_TOKEN) return process.env.ACE_ADMIN_TOKEN;
  try {
    return readFileSync(tokenFile, 'utf8').trim();
  } catch (error) {
    throw new Error(`no admin token: set ACE_ADMIN_TOKEN, or DATA_DIR to the service's data directory (${tokenFile}: ${error.code})`);
  }
}
const token = adminToken();

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
const admin = (method, route, body) => call(adminUrl, method, route, body, { authorization: `Bearer ${token}` });

const platform = await admin('POST', '/admin/v1/platforms', {
  name: 'Demo Shop',
  // A verified domain belongs to one platform: each run of the demo registers its own.
  domain: `shop-${randomBytes(3).toString('hex')}.example.com`,
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
const issued = await call(publicUrl, 'POST', '/api/v1/auth/token', {
  api_key_id: agent.api_key_id,
  secret: agent.secret,
  platform_id: platform.platform_id,
});
const jwks = createRemoteJWKSet(new URL('/.well-known/jwks.json', publicUrl));
const { payload, protectedHeader } = await jwtVerify(issued.access_token, jwks, { audience: platform.platform_id });
console.log('token   ', JSON.stringify(protectedHeader), JSON.stringify(payload));
const scopeFile = await fetch(`${publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`).then((r) => r.text());
console.log('scopes.yaml\n' + scopeFile);
