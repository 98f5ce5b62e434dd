// A tiny platform: node:http protected by the middleware. Scopes come from the scope file.
//   ACE_PUBLIC_URL  the credential exchange service (default http://localhost:8080); also the expected issuer
//   ACE_ISSUER      expected `iss`, when the service's ISSUER differs from ACE_PUBLIC_URL
//   SCOPES_FILE     default $EXAMPLE_DIR/scopes.yaml (EXAMPLE_DIR default ./data/example)
//   FEED_TOKEN      the platform's revocation feed token (default: the file $EXAMPLE_DIR/feed-token)
//   PORT            this platform's port, default 3000
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { createVerifier, protectNodeHandler } from '@agent-credential-exchange/middleware';

// Older names, refused rather than ignored: a value set under one would otherwise be silently replaced by a default.
for (const [old, now] of [['SERVICE_URL', 'ACE_PUBLIC_URL'], ['ISSUER', 'ACE_ISSUER']]) {
  if (process.env[old] && !process.env[now]) throw new Error(`${old} is no longer read: set ${now}`);
}
const serviceUrl = process.env.ACE_PUBLIC_URL || 'http://localhost:8080';
const exampleDir = process.env.EXAMPLE_DIR ?? './data/example';
const verifier = createVerifier({
  serviceUrl,
  // Who may read this platform's revocation feed: a feed credential (POST /admin/v1/platforms/{id}/feed-credentials).
  feedToken: process.env.FEED_TOKEN || readFileSync(`${exampleDir}/feed-token`, 'utf8').trim(),
  issuer: process.env.ACE_ISSUER || undefined,
  scopesFile: process.env.SCOPES_FILE ?? `${exampleDir}/scopes.yaml`,
});
// Fail at start-up rather than on the first request if the service cannot be reached; this also subscribes
// to the platform's revocation feed, so tokens the operator takes back are refused within about a second.
await verifier.ready();

const orders = new Map([['42', { id: '42', item: 'coffee beans', quantity: 2 }]]);

function json(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

// Runs only for requests whose token is valid for this platform and carries the route's scopes.
const api = protectNodeHandler(verifier, (req, res) => {
  const { pathname } = new URL(req.url, 'http://platform');
  const id = pathname.split('/')[2];
  if (req.method === 'GET' && pathname.startsWith('/orders/')) {
    const order = orders.get(id);
    return order ? json(res, 200, { ...order, read_by: req.agent.agentId }) : json(res, 404, { detail: 'no such order' });
  }
  if (req.method === 'POST' && pathname === '/orders') {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      const order = { id: String(orders.size + 100), ...JSON.parse(body || '{}'), placed_by: req.agent.agentId };
      orders.set(order.id, order);
      json(res, 201, order);
    });
    return;
  }
  if (req.method === 'DELETE' && pathname.startsWith('/orders/')) {
    orders.delete(id);
    res.writeHead(204);
    return res.end();
  }
  json(res, 404, { detail: 'not found' });
});

const server = http.createServer((req, res) => {
  // Public routes are served before the middleware; everything else goes through it.
  if (req.url === '/health') return json(res, 200, { ok: true });
  api(req, res);
});
const port = Number(process.env.PORT ?? 3000);
server.listen(port, '127.0.0.1', () => console.log(`platform ${verifier.platformId} listening on http://127.0.0.1:${port}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
process.on('SIGINT', () => server.close(() => process.exit(0)));
