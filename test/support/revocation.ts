// Helpers of the revocation tests: a platform protected by the middleware, token fetches, waiting for a
// refusal, and a TCP proxy that can cut a middleware off from the service.
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { createVerifier, protectNodeHandler, type Verifier, type RevocationFeedOptions } from '../../packages/middleware/src/index.js';
import { sleep } from '../../kit/wait.js';

export interface Platform {
  url: string;
  verifier: Verifier;
  close(): Promise<void>;
}

/** `feedToken`: a feed credential of the platform (AdminClient.feedToken). */
export async function startPlatform(options: { serviceUrl: string; platformId: string; issuer: string; feedToken: string; feed?: RevocationFeedOptions }): Promise<Platform> {
  const yaml = await (await fetch(`${options.serviceUrl}/api/v1/platforms/${options.platformId}/scopes.yaml`)).text();
  const verifier = createVerifier({
    serviceUrl: options.serviceUrl,
    issuer: options.issuer,
    scopesYaml: yaml,
    unmatchedRoutes: 'authenticate',
    feedToken: options.feedToken,
    revocationFeed: { warn: () => {}, ...options.feed },
  });
  await verifier.ready();
  const server = http.createServer(
    protectNodeHandler(verifier, (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    verifier,
    async close() {
      verifier.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

export async function token(serviceUrl: string, apiKeyId: string, secret: string, platformId: string): Promise<string> {
  const response = await fetch(`${serviceUrl}/api/v1/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ api_key_id: apiKeyId, secret, platform_id: platformId }),
  });
  const body = (await response.json()) as { access_token?: string };
  if (response.status !== 200 || !body.access_token) throw new Error(`token: HTTP ${response.status} ${JSON.stringify(body)}`);
  return body.access_token;
}

export async function call(platformUrl: string, accessToken: string): Promise<{ status: number; challenge: string | null }> {
  const response = await fetch(`${platformUrl}/anything`, { headers: { authorization: `Bearer ${accessToken}` } });
  await response.arrayBuffer();
  return { status: response.status, challenge: response.headers.get('www-authenticate') };
}

/** Polls the platform with the token until it answers 401 invalid_token; resolves with the ms it took. */
export async function msUntilRefused(platformUrl: string, accessToken: string, since: number, limitMs = 15_000): Promise<number> {
  while (Date.now() - since < limitMs) {
    const { status, challenge } = await call(platformUrl, accessToken);
    if (status === 401) {
      if (!challenge?.includes('error="invalid_token"')) throw new Error(`401 without invalid_token: ${challenge}`);
      return Date.now() - since;
    }
    if (status !== 200) throw new Error(`unexpected HTTP ${status}`);
    await sleep(10);
  }
  throw new Error(`still accepted after ${limitMs} ms`);
}

/** A TCP proxy to `target` that can be cut (every connection dropped, new ones refused) and restored. */
export async function startProxy(target: string): Promise<{ url: string; cut(): Promise<void>; restore(): Promise<void>; close(): Promise<void> }> {
  const { hostname, port } = new URL(target);
  const sockets = new Set<net.Socket>();
  let server: net.Server;
  const open = (listenPort: number) =>
    new Promise<number>((resolve) => {
      server = net.createServer((client) => {
        const upstream = net.connect(Number(port), hostname);
        sockets.add(client).add(upstream);
        const drop = () => {
          client.destroy();
          upstream.destroy();
          sockets.delete(client);
          sockets.delete(upstream);
        };
        client.on('error', drop).on('close', drop);
        upstream.on('error', drop).on('close', drop);
        client.pipe(upstream).pipe(client);
      });
      server.listen(listenPort, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
    });
  const listenPort = await open(0);
  const closeServer = () =>
    new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      sockets.clear();
      server.close(() => resolve());
    });
  return {
    url: `http://127.0.0.1:${listenPort}`,
    cut: closeServer,
    restore: async () => void (await open(listenPort)),
    close: closeServer,
  };
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}
