// The agent client rides out a restart of the real service. While the service is down, a call for a new
// token keeps retrying (refused connections when the agent talks to the service directly, 502 pages when an
// ingress stands in front of it) and succeeds once the service is back. A cached token in its renewal
// window is handed out at once while a single renewal retries in the background; once the token has
// expired, callers wait on that renewal.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startService, type ServiceHandle } from '../support/service.js';
import { waitFor } from '../../kit/wait.js';
import { AdminClient, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { AgentClient } from '../../packages/client/src/index.js';

const TOKEN_PATH = '/api/v1/auth/token';

/** Every attempt of the client at the token endpoint, as the client saw it. */
function recordingFetch() {
  const outcomes: (number | 'network')[] = [];
  let inFlight = 0;
  const stats = { maxInFlight: 0 };
  const wrapped: typeof fetch = async (input, init) => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    if (url.pathname !== TOKEN_PATH) return fetch(input, init);
    stats.maxInFlight = Math.max(stats.maxInFlight, ++inFlight);
    try {
      const response = await fetch(input, init);
      outcomes.push(response.status);
      return response;
    } catch (error) {
      outcomes.push('network');
      throw error;
    } finally {
      inFlight--;
    }
  };
  return { fetch: wrapped, outcomes, stats };
}

function audience(token: string): unknown {
  return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).aud;
}

/** Tracks whether a promise settled, without consuming its outcome. */
function watch<T>(promise: Promise<T>) {
  const state = { settled: false };
  promise.then(
    () => (state.settled = true),
    () => (state.settled = true),
  );
  return state;
}

let service: ServiceHandle;
/** Every instance started, the first (which owns the database) first. */
const instances: ServiceHandle[] = [];
let admin: AdminClient;
let platforms: PlatformRecord[];
let agent: AgentCredentials;
let ingress: http.Server;
let ingressUrl: string;

/** Stops the service; `restart` brings it back on the same ports with the same state. */
async function stopService(): Promise<void> {
  await service.stop('SIGTERM');
}
async function restartService(): Promise<void> {
  service = await startService({
    mode: 'real',
    database: service.database,
    dataDir: service.dataDir,
    redisKeyPrefix: service.env.REDIS_KEY_PREFIX,
    env: { PORT: service.env.PORT, ADMIN_PORT: service.env.ADMIN_PORT, ADMIN_TOKEN: service.env.ADMIN_TOKEN },
  });
  instances.push(service);
}

beforeAll(async () => {
  service = await startService({ mode: 'real' });
  instances.push(service);
  admin = new AdminClient(service);
  const scopes = [{ name: 'x:read', description: 'Read' }];
  platforms = [];
  for (const name of ['One', 'Two', 'Three']) platforms.push(await admin.createPlatform({ name, scopes }));
  agent = await admin.createAgent('restart-agent');
  for (const p of platforms) await admin.grant(agent.agent_id, p.platform_id, ['x:read']);

  // An ingress stand-in: forwards to the service, answers 502 while nothing listens behind it.
  const upstream = new URL(service.publicUrl);
  ingress = http.createServer((req, res) => {
    const forward = http.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', () => {
      if (res.headersSent) return res.destroy();
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end('<html><body>502 Bad Gateway</body></html>');
    });
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => ingress.listen(0, '127.0.0.1', resolve));
  ingressUrl = `http://127.0.0.1:${(ingress.address() as AddressInfo).port}`;
}, 120_000);

afterEach(() => vi.useRealTimers());

afterAll(async () => {
  ingress?.closeAllConnections();
  await new Promise((resolve) => ingress?.close(resolve));
  // The first instance owns the database: the later ones stop first.
  for (const instance of instances.slice(1)) await instance.stop('SIGKILL');
  await instances[0]?.dispose();
});

// One restart serves every check (starting the service is the slow part on a shared machine).
describe('a restart of the service', () => {
  it('new tokens wait for the service and come once it is back; a token near expiry is used at once meanwhile', async () => {
    const options = { apiKeyId: agent.api_key_id, secret: agent.secret };
    // Two agents asking for a token they do not hold yet: one talks to the service, one to the ingress.
    const direct = recordingFetch();
    const behindIngress = recordingFetch();
    const clients = [
      await AgentClient.start({ ...options, serviceUrl: service.publicUrl, fetch: direct.fetch }),
      await AgentClient.start({ ...options, serviceUrl: ingressUrl, fetch: behindIngress.fetch }),
    ];
    // An agent holding a token that will be near expiry while the service is down.
    const renewal = recordingFetch();
    const renewalErrors: string[] = [];
    const holder = await AgentClient.start({
      ...options,
      serviceUrl: service.publicUrl,
      fetch: renewal.fetch,
      onRenewalError: (_platformId, error) => renewalErrors.push(error.code),
    });
    const held = platforms[2].platform_id;
    const first = await holder.token(held);
    const issuedAt = Date.now();
    expect(renewal.outcomes).toEqual([200]);

    await stopService();

    // 1. New tokens: retried (refused connections, 502 pages), not thrown.
    const pending = clients.map((client) => client.token(platforms[1].platform_id));
    const watched = pending.map(watch);
    await waitFor('refused connections', () => direct.outcomes.filter((o) => o === 'network').length >= 2, 30_000);
    await waitFor('502 from the ingress', () => behindIngress.outcomes.filter((o) => o === 502).length >= 2, 30_000);
    expect(watched.map((w) => w.settled)).toEqual([false, false]);

    // 2. The held token. Only Date is faked (timers stay real): it is now 20 s from expiry, inside the
    // 30 s renewal window. Every caller gets it with the service still down.
    vi.useFakeTimers({ toFake: ['Date'], now: issuedAt + 880_000 });
    const many = Promise.all(Array.from({ length: 20 }, () => holder.token(held)));
    const manyState = watch(many);
    await waitFor('the background renewal to be refused twice', () => renewal.outcomes.filter((o) => o === 'network').length >= 2, 30_000);
    expect(manyState.settled).toBe(true); // long before the renewal could end
    expect(new Set(await many)).toEqual(new Set([first]));
    expect(await holder.token(held)).toBe(first);
    expect(renewal.stats.maxInFlight).toBe(1); // single-flight: one renewal, retried in sequence

    // 3. Expired: callers now wait on that renewal.
    vi.setSystemTime(issuedAt + 901_000);
    const waiting = Promise.all(Array.from({ length: 5 }, () => holder.token(held)));
    const waitingState = watch(waiting);
    const attemptsSoFar = renewal.outcomes.length;
    await waitFor('another refused attempt', () => renewal.outcomes.length > attemptsSoFar, 30_000);
    expect(waitingState.settled).toBe(false);

    await restartService();

    const tokens = await Promise.all(pending);
    for (const token of tokens) expect(audience(token)).toBe(platforms[1].platform_id);
    expect(direct.outcomes.at(-1)).toBe(200);
    expect(behindIngress.outcomes.at(-1)).toBe(200);

    const renewed = await waiting;
    expect(new Set(renewed).size).toBe(1);
    expect(renewed[0]).not.toBe(first);
    expect(audience(renewed[0])).toBe(held);
    expect(renewal.outcomes.filter((o) => o === 200)).toHaveLength(2); // the first token and its one renewal
    expect(renewal.stats.maxInFlight).toBe(1);
    expect(renewalErrors).toEqual([]); // the renewal succeeded in the end: nothing to report
  });
});
