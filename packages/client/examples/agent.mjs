// An agent using the client: lists its platforms, then calls the example platform. The client adds the
// Bearer token, reuses it, and renews it before expiry or after a 401.
//   ACE_PUBLIC_URL  the credential exchange service, default http://localhost:8080
//   PLATFORM_URL    default http://127.0.0.1:3000
//   AGENT_FILE      default $EXAMPLE_DIR/agent.json (EXAMPLE_DIR default ./data/example; written by setup.mjs)
import { readFileSync } from 'node:fs';
import { AgentClient } from '@agent-credential-exchange/client';

// Older names, refused rather than ignored: a URL set under one would otherwise be silently replaced by a default.
for (const [old, now] of [['SERVICE_URL', 'ACE_PUBLIC_URL']]) {
  if (process.env[old] && !process.env[now]) throw new Error(`${old} is no longer read: set ${now}`);
}
const serviceUrl = process.env.ACE_PUBLIC_URL || 'http://localhost:8080';
const platformUrl = process.env.PLATFORM_URL ?? 'http://127.0.0.1:3000';
const credentials = JSON.parse(readFileSync(process.env.AGENT_FILE ?? `${process.env.EXAMPLE_DIR ?? './data/example'}/agent.json`, 'utf8'));

const client = await AgentClient.start({
  serviceUrl,
  apiKeyId: credentials.api_key_id,
  secret: credentials.secret,
  // The platform runs on localhost, which is no verified domain: map its origin explicitly.
  platforms: { [platformUrl]: credentials.platform_id },
});
console.log(`agent ${client.agentId}: ${client.platforms().length} platform(s)`, String(client));

async function call(method, path, body) {
  const response = await client.fetch(`${platformUrl}${path}`, {
    method,
    headers: body ? { 'content-type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  console.log(`${method} ${path} -> ${response.status} ${text}${response.status >= 400 ? `  (${response.headers.get('www-authenticate')})` : ''}`);
  return response.status;
}

const statuses = [
  await call('GET', '/orders/42'), // orders:read: allowed
  await call('POST', '/orders', { item: 'tea', quantity: 1 }), // orders:write: allowed
  await call('DELETE', '/orders/42'), // orders:delete: not granted, 403 insufficient_scope
];
const expected = [200, 201, 403];
process.exitCode = statuses.every((s, i) => s === expected[i]) ? 0 : 1;
