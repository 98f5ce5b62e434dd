// The client honours 429 Retry-After (from the service's per-key token limit and from a platform), with
// jitter added on top of the server's delay, never taken off it.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type ServiceHandle } from '../support/service.js';
import { AdminClient, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { AgentClient, AgentClientError, RetriesExhaustedError } from '../../packages/client/src/index.js';

interface Call {
  path: string;
  sentAt: number;
  status?: number;
  retryAfter?: string | null;
}

function recordingFetch() {
  const calls: Call[] = [];
  const wrapped: typeof fetch = async (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const call: Call = { path: new URL(url).pathname, sentAt: Date.now() };
    calls.push(call);
    const response = await fetch(input, init);
    call.status = response.status;
    call.retryAfter = response.headers.get('retry-after');
    return response;
  };
  return { fetch: wrapped, calls };
}

/** Every 429 that was followed by another request to the same path: that request waited at least Retry-After. */
function expectRetryAfterHonoured(calls: Call[], path: string) {
  const ofPath = calls.filter((c) => c.path === path);
  let checked = 0;
  ofPath.forEach((call, i) => {
    const next = ofPath[i + 1];
    if (call.status !== 429 || !next) return;
    expect(call.retryAfter).toMatch(/^\d+$/);
    // Timer granularity only; the jitter is added on top of Retry-After.
    expect(next.sentAt - call.sentAt).toBeGreaterThanOrEqual(Number(call.retryAfter) * 1000 - 20);
    checked++;
  });
  return checked;
}

let service: ServiceHandle;
let admin: AdminClient;
let first: PlatformRecord;
let second: PlatformRecord;
let agent: AgentCredentials;

beforeAll(async () => {
  service = await startService({
    mode: 'real',
    env: { RATE_LIMIT_TOKEN_POINTS: '1', RATE_LIMIT_TOKEN_WINDOW_SECONDS: '2' },
  });
  admin = new AdminClient(service);
  const scopes = [{ name: 'x:read', description: 'Read' }];
  first = await admin.createPlatform({ name: 'First', scopes });
  second = await admin.createPlatform({ name: 'Second', scopes });
  agent = await admin.createAgent('retry-agent');
  await admin.grant(agent.agent_id, first.platform_id, ['x:read']);
  await admin.grant(agent.agent_id, second.platform_id, ['x:read']);
}, 120_000);

afterAll(async () => {
  await service?.dispose();
});

describe('429 Retry-After', () => {
  it('waits as the token endpoint asks, then gets the token', async () => {
    const recorder = recordingFetch();
    const client = await AgentClient.start({ serviceUrl: service.publicUrl, apiKeyId: agent.api_key_id, secret: agent.secret, fetch: recorder.fetch });
    await client.token(first.platform_id);
    // The key's budget (1 per 2 s) is spent: the next token request is refused with 429 first.
    const token = await client.token(second.platform_id);
    expect(token.split('.')).toHaveLength(3);

    const statuses = recorder.calls.filter((c) => c.path === '/api/v1/auth/token').map((c) => c.status);
    expect(statuses[0]).toBe(200);
    expect(statuses).toContain(429);
    expect(statuses.at(-1)).toBe(200);
    expect(expectRetryAfterHonoured(recorder.calls, '/api/v1/auth/token')).toBeGreaterThanOrEqual(1);
  });

  it('gives up with an AgentClientError carrying Retry-After when the wait is longer than allowed', async () => {
    const client = await AgentClient.start({
      serviceUrl: service.publicUrl,
      apiKeyId: agent.api_key_id,
      secret: agent.secret,
      maxRetryDelaySeconds: 0,
    });
    // Spend the budget, then ask again at once.
    await client.token(first.platform_id).catch(() => undefined);
    const error = await client.token(second.platform_id).catch((e) => e);
    expect(error).toBeInstanceOf(AgentClientError);
    expect(error.status).toBe(429);
    expect(error.code).toBe('rate_limited');
    expect(error.retryAfterSeconds).toBeGreaterThanOrEqual(1);
  });

  it('waits as a platform asks and resends the request', async () => {
    let hits = 0;
    const bodies: string[] = [];
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        hits++;
        bodies.push(`${req.headers.authorization?.slice(0, 7)}|${body}`);
        if (hits === 1) {
          res.writeHead(429, { 'retry-after': '1' });
          return res.end();
        }
        res.end('ok');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      // Let the token budget refill so the token itself comes at once.
      await new Promise((r) => setTimeout(r, 2100));
      const recorder = recordingFetch();
      const client = await AgentClient.start({
        serviceUrl: service.publicUrl,
        apiKeyId: agent.api_key_id,
        secret: agent.secret,
        fetch: recorder.fetch,
        platforms: { [url]: first.platform_id },
      });
      const response = await client.fetch(`${url}/things`, { method: 'POST', body: 'payload' });
      expect(response.status).toBe(200);
      expect(await response.text()).toBe('ok');
      expect(bodies).toEqual(['Bearer |payload', 'Bearer |payload']);
      expect(expectRetryAfterHonoured(recorder.calls, '/things')).toBe(1);
    } finally {
      server.close();
    }
  });
});
