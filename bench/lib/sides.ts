// The servers measured beside the service, started once per scenario and kept up while rounds interleave
// (an idle server costs nothing measurable): bare uWS serving the same JWKS bytes, bare uWS signers
// (crypto.sign), and node-oidc-provider as the peer. Every one gets the service's UV_THREADPOOL_SIZE.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnReady, type Child } from './children.js';
import { decodeJwt, freshRequest } from './http.js';
import { freePort } from '../../kit/ports.js';
import type { RequestSpec } from './load.js';

export interface SideServer {
  url: string;
  requests: RequestSpec[];
  note: string;
  stop(): Promise<void>;
  /** The server processes (for CPU readings), where the side knows them. */
  pids?: number[];
}

const JSON_HEADERS = { 'content-type': 'application/json' };
export const JWKS_PATH = '/.well-known/jwks.json';

export async function startBareJwks(jwksBytes: string, processes: number, uvThreads: number): Promise<SideServer> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ace-bench-jwks-'));
  const file = path.join(dir, 'jwks.json');
  writeFileSync(file, jwksBytes);
  const port = await freePort();
  const servers: Child[] = [];
  const stop = async () => {
    await Promise.all(servers.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < processes; i++) {
      servers.push(await spawnReady(new URL('../limits/bare-uws.js', import.meta.url), { PORT: String(port), JWKS_FILE: file, UV_THREADPOOL_SIZE: String(uvThreads) }));
    }
    const check = await freshRequest(`http://127.0.0.1:${port}${JWKS_PATH}`, 'GET');
    if (check.body !== jwksBytes) throw new Error('bare uWS does not serve the same JWKS bytes');
  } catch (error) {
    await stop();
    throw error;
  }
  return { url: `http://127.0.0.1:${port}`, requests: [{ method: 'GET', path: JWKS_PATH }], note: `${processes} process(es), same bytes`, stop };
}

export async function startBareSigner(processes: number, mode: 'sync' | 'async', uvThreads: number): Promise<SideServer> {
  const port = await freePort();
  const servers: Child[] = [];
  try {
    for (let i = 0; i < processes; i++) {
      servers.push(await spawnReady(new URL('../limits/bare-signer.js', import.meta.url), { PORT: String(port), SIGN_MODE: mode, UV_THREADPOOL_SIZE: String(uvThreads) }));
    }
  } catch (error) {
    await Promise.all(servers.map((s) => s.stop()));
    throw error;
  }
  return {
    url: `http://127.0.0.1:${port}`,
    requests: [{ method: 'POST', path: '/token', headers: JSON_HEADERS, body: '{"api_key_id":"x","secret":"y","platform_id":"z"}' }],
    note: `${processes} process(es), crypto.sign ${mode === 'sync' ? 'on the HTTP thread' : `on libuv's pool (${uvThreads} threads)`}`,
    stop: async () => void (await Promise.all(servers.map((s) => s.stop()))),
    pids: servers.map((s) => s.process.pid!),
  };
}

export async function startPeer(processes: number, uvThreads: number): Promise<SideServer> {
  const port = await freePort();
  const peer = await spawnReady(new URL('../peer/oidc-peer.js', import.meta.url), {
    PORT: String(port),
    PEER_WORKERS: String(processes),
    // Same libuv pool as the service: jose signs through WebCrypto there in both.
    UV_THREADPOOL_SIZE: String(uvThreads),
  });
  try {
    const [, , clientId, clientSecret, resource] = peer.readyLine.trim().split(' ');
    const body = new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret, resource, scope: 'orders:read orders:write' }).toString();
    const headers = { 'content-type': 'application/x-www-form-urlencoded' };
    const check = await freshRequest(`http://127.0.0.1:${port}/token`, 'POST', body, headers);
    if (check.status !== 200) throw new Error(`peer token: ${check.status} ${check.body.slice(0, 300)}`);
    const { header, payload } = decodeJwt(JSON.parse(check.body).access_token);
    if (header.alg !== 'RS256' || payload.aud !== resource) throw new Error(`peer token: unexpected JWT ${JSON.stringify({ header, payload })}`);
    return {
      url: `http://127.0.0.1:${port}`,
      requests: [{ method: 'POST', path: '/token', headers, body }],
      note: `${processes} process(es), client_secret_post, RS256 JWT, UV_THREADPOOL_SIZE ${uvThreads}`,
      stop: () => peer.stop(),
    };
  } catch (error) {
    await peer.stop();
    throw error;
  }
}
