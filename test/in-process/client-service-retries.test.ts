// What the agent client retries when it calls the service, through real HTTP: a node:http server stands in
// for the service (or the ingress in front of it) and answers from a script. 502, 503 and 504 (what a
// restart looks like from outside), 429 and dropped connections are retried, honouring Retry-After
// (seconds and HTTP-date), until the wait budget ends with a RetriesExhaustedError; 500 and 4xx are not.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AgentClient, AgentClientError, RetriesExhaustedError } from '../../packages/client/src/index.js';

const LISTING = '/api/v1/auth/agents/me/platforms';
const TOKEN = '/api/v1/auth/token';
const SECRET = 'the-agent-secret-never-shown';

type Answer = (res: http.ServerResponse) => void;
interface Hit {
  path: string;
  at: number;
}

/** An answer in the contract's Error shape. */
const error = (status: number, code: string, headers: Record<string, string> = {}): Answer => (res) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ error_code: code, detail: `scripted ${status}` }));
};
/** What an ingress answers while no instance is ready: an HTML page. */
const ingress = (status: 502 | 504): Answer => (res) => {
  res.writeHead(status, { 'content-type': 'text/html' });
  res.end(`<html><body><h1>${status}</h1></body></html>`);
};
/** No answer at all: the connection is cut. */
const drop: Answer = (res) => res.socket?.destroy();

const hits: Hit[] = [];
const script = new Map<string, Answer[]>();
let tokens = 0;
let server: http.Server;
let serviceUrl: string;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const path = req.url ?? '';
      hits.push({ path, at: Date.now() });
      const scripted = script.get(path)?.shift();
      if (scripted) return scripted(res);
      res.writeHead(200, { 'content-type': 'application/json' });
      if (path === LISTING) {
        res.end(JSON.stringify({ agent_id: 'a1', platforms: [{ platform_id: 'p1', granted_scopes: ['x:read'], status: 'active', hostname: null }] }));
      } else {
        res.end(JSON.stringify({ access_token: `h.p.s${++tokens}`, token_type: 'Bearer', expires_in: 900 }));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  serviceUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

afterEach(() => {
  hits.length = 0;
  script.clear();
});

const start = (extra: Partial<Parameters<typeof AgentClient.start>[0]> = {}) =>
  AgentClient.start({ serviceUrl, apiKeyId: 'key-1', secret: SECRET, ...extra });
const hitsOf = (path: string) => hits.filter((h) => h.path === path);

describe('retried', () => {
  it('502 and 504 (HTML pages) and 503 with Retry-After, then the listing', async () => {
    script.set(LISTING, [ingress(502), ingress(504), error(503, 'service_unavailable', { 'retry-after': '1' })]);
    const client = await start();
    expect(client.agentId).toBe('a1');
    const listing = hitsOf(LISTING);
    expect(listing).toHaveLength(4);
    // The attempt after the 503 waited its Retry-After (timer granularity only: jitter comes on top).
    expect(listing[3].at - listing[2].at).toBeGreaterThanOrEqual(1000 - 20);
  });

  it('Retry-After as an HTTP-date is waited for, then the token', async () => {
    const client = await start();
    let until = 0;
    script.set(TOKEN, [
      (res) => {
        // Whole seconds (an HTTP-date has no milliseconds), at least one second ahead.
        until = (Math.floor(Date.now() / 1000) + 2) * 1000;
        error(503, 'service_unavailable', { 'retry-after': new Date(until).toUTCString() })(res);
      },
    ]);
    expect(await client.token('p1')).toMatch(/^h\.p\.s\d+$/);
    const token = hitsOf(TOKEN);
    expect(token).toHaveLength(2);
    expect(token[1].at).toBeGreaterThanOrEqual(until - 20);
  });

  it('cut connections, then the token', async () => {
    const client = await start();
    script.set(TOKEN, [drop, drop]);
    expect(await client.token('p1')).toMatch(/^h\.p\.s\d+$/);
    expect(hitsOf(TOKEN)).toHaveLength(3);
  });

  it('more than three refusals in a row (the old maxRetries) with the defaults', async () => {
    const client = await start();
    const soon = { 'retry-after': '0' }; // keeps the test short: jitter only
    script.set(TOKEN, [ingress(502), ingress(504), error(503, 'service_unavailable', soon), error(503, 'service_unavailable', soon), error(429, 'rate_limited', soon)]);
    expect(await client.token('p1')).toMatch(/^h\.p\.s\d+$/);
    expect(hitsOf(TOKEN)).toHaveLength(6);
  });
});

describe('not retried', () => {
  for (const [status, code] of [
    [500, 'internal_error'],
    [501, 'not_implemented'],
    [400, 'invalid_request'],
    [401, 'invalid_credentials'],
    [403, 'platform_not_granted'],
    [404, 'not_found'],
  ] as const) {
    it(`${status} ${code}: one attempt, the service's error`, async () => {
      const client = await start();
      script.set(TOKEN, [error(status, code), error(status, code)]);
      const failure = await client.token('p1').catch((e) => e);
      expect(failure).toBeInstanceOf(AgentClientError);
      expect(failure).not.toBeInstanceOf(RetriesExhaustedError);
      expect([failure.status, failure.code]).toEqual([status, code]);
      expect(hitsOf(TOKEN)).toHaveLength(1);
    });
  }
});

describe('giving up', () => {
  it('the wait budget spent: RetriesExhaustedError with the last answer', async () => {
    script.set(LISTING, Array.from({ length: 50 }, () => error(503, 'service_unavailable', { 'retry-after': '1' })));
    const began = Date.now();
    const failure = await start({ maxWaitMs: 2500 }).catch((e) => e);
    expect(failure).toBeInstanceOf(RetriesExhaustedError);
    expect(failure).toBeInstanceOf(AgentClientError);
    expect(failure).toMatchObject({ reason: 'maxWaitMs', status: 503, code: 'service_unavailable', retryAfterSeconds: 1 });
    // 1 s apart (plus jitter) within 2.5 s: two or three attempts.
    expect(failure.attempts).toBe(hitsOf(LISTING).length);
    expect(failure.attempts).toBeGreaterThanOrEqual(2);
    expect(failure.attempts).toBeLessThanOrEqual(3);
    expect(Date.now() - began).toBeLessThan(30_000); // generous: bounded, not minutes
    expect(failure.message).not.toContain(SECRET);
  });

  it('a Retry-After that ends after the budget: gives up at once instead of waiting for nothing', async () => {
    script.set(LISTING, [error(503, 'service_unavailable', { 'retry-after': '30' })]);
    const failure = await start({ maxWaitMs: 5000 }).catch((e) => e);
    expect(failure).toBeInstanceOf(RetriesExhaustedError);
    expect(failure).toMatchObject({ reason: 'maxWaitMs', attempts: 1, retryAfterSeconds: 30 });
    expect(hitsOf(LISTING)).toHaveLength(1);
  });

  it('maxRetries, when given, still bounds the count', async () => {
    script.set(LISTING, Array.from({ length: 10 }, () => ingress(502)));
    const failure = await start({ maxRetries: 2 }).catch((e) => e);
    expect(failure).toBeInstanceOf(RetriesExhaustedError);
    expect(failure).toMatchObject({ reason: 'maxRetries', status: 502, attempts: 3, code: 'ERR_ACE_BAD_RESPONSE' });
    expect(hitsOf(LISTING)).toHaveLength(3);
  });

  it('nothing listening: ERR_ACE_UNREACHABLE once the budget is spent', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const failure = await AgentClient.start({ serviceUrl: url, apiKeyId: 'key-1', secret: SECRET, maxWaitMs: 1500 }).catch((e) => e);
    expect(failure).toBeInstanceOf(RetriesExhaustedError);
    expect(failure).toMatchObject({ reason: 'maxWaitMs', status: undefined, code: 'ERR_ACE_UNREACHABLE' });
    expect(failure.attempts).toBeGreaterThanOrEqual(2);
    expect(failure.message).not.toContain(SECRET);
  });

  it('bad options are refused with a clear error', async () => {
    await expect(start({ maxWaitMs: -1 })).rejects.toThrow('maxWaitMs must be a finite number >= 0');
    await expect(start({ maxWaitMs: Number.NaN })).rejects.toThrow(TypeError);
    expect(hits).toHaveLength(0);
  });
});
