// Registers the example platform and agent through the admin API of a running service, then saves the
// platform's scope file and the agent's credentials where platform.mjs and agent.mjs look for them.
// The same names as `ace` and `npm run demo`:
//   ACE_ADMIN_URL    admin listener            (default http://127.0.0.1:8081)
//   ACE_ADMIN_TOKEN  admin bearer token        (default: read from $DATA_DIR/admin-token, DATA_DIR default ./data)
//   ACE_PUBLIC_URL   public listener           (default http://localhost:8080)
//   EXAMPLE_DIR      where to write the files  (default ./data/example; ./data is git-ignored)
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

// Older names, refused rather than ignored: a URL set under one would otherwise be silently replaced by a default.
for (const [old, now] of [['SERVICE_URL', 'ACE_PUBLIC_URL'], ['ADMIN_URL', 'ACE_ADMIN_URL']]) {
  if (process.env[old] && !process.env[now]) throw new Error(`${old} is no longer read: set ${now}`);
}
const adminUrl = (process.env.ACE_ADMIN_URL || 'http://127.0.0.1:8081').replace(/\/+$/, '');
const serviceUrl = (process.env.ACE_PUBLIC_URL || 'http://localhost:8080').replace(/\/+$/, '');
const dataDir = process.env.DATA_DIR || './data';
const exampleDir = process.env.EXAMPLE_DIR || path.join(dataDir, 'example');
function readAdminToken() {
  if (process.env.ACE_ADMIN_TOKEN) return process.env.ACE_ADMIN_TOKEN;
  const file = path.join(dataDir, 'admin-token');
  try {
    return readFileSync(file, 'utf8').trim();
  } catch (error) {
    throw new Error(`no admin token: set ACE_ADMIN_TOKEN, or DATA_DIR to the service's data directory (${file}: ${error.code})`);
  }
}
const adminToken = readAdminToken();

async function admin(method, urlPath, body) {
  const response = await fetch(`${adminUrl}${urlPath}`, {
    method,
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await response.json();
  if (!response.ok) throw new Error(`${method} ${urlPath}: HTTP ${response.status} ${json.detail ?? ''}`);
  return json;
}

const platform = await admin('POST', '/admin/v1/platforms', {
  name: 'Example Shop',
  scopes: [
    { name: 'orders:read', description: 'Read orders' },
    { name: 'orders:write', description: 'Place orders' },
    { name: 'orders:delete', description: 'Delete orders' },
  ],
  routes: [
    { method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] },
    { method: 'POST', path: '/orders', scopes: ['orders:write'] },
    { method: 'DELETE', path: '/orders/{id}', scopes: ['orders:delete'] },
  ],
});
const agent = await admin('POST', '/admin/v1/agents', { name: 'example-agent' });
// The agent may read and place orders, not delete them.
await admin('PUT', `/admin/v1/agents/${agent.agent_id}/grants/${platform.platform_id}`, { scopes: ['orders:read', 'orders:write'] });

// What a platform operator does once after registering scopes: download the scope file.
const scopeFile = await fetch(`${serviceUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`);
if (!scopeFile.ok) throw new Error(`scope file: HTTP ${scopeFile.status}`);

// ...and a feed credential: the platform's middleware reads the revocation feed with its token (shown once).
const feed = await admin('POST', `/admin/v1/platforms/${platform.platform_id}/feed-credentials`);

mkdirSync(exampleDir, { recursive: true });
writeFileSync(path.join(exampleDir, 'scopes.yaml'), await scopeFile.text());
writeFileSync(path.join(exampleDir, 'feed-token'), feed.feed_token, { mode: 0o600 });
// The secret is shown once by the service; keep it in a file only its owner can read.
writeFileSync(
  path.join(exampleDir, 'agent.json'),
  JSON.stringify({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id }, null, 2),
  { mode: 0o600 },
);
console.log(`platform ${platform.platform_id} and agent ${agent.agent_id} created; files in ${exampleDir}`);
