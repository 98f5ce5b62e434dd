// Enumeration and timing: an unknown api_key_id and a wrong secret (also for an agent in a rotation's
// grace) are indistinguishable, in bytes and in time (every refusal verifies one argon2id hash: a decoy
// for an unknown id, the hash the secret's hint points at during a grace). The admin token is compared in constant time (the comparison
// itself: test/in-process/admin-auth.test.ts), and the admin API refuses every route and method without it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { AdminClient, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { contractErrorProblem, httpRequest, rawExchange, type RawResponse } from '../support/faults.js';

const SAMPLES = 100;

/** Two-sided Mann-Whitney U test, normal approximation with tie correction: the p-value. */
function mannWhitneyP(a: number[], b: number[]): number {
  const all = [...a.map((v) => ({ v, g: 0 })), ...b.map((v) => ({ v, g: 1 }))].sort((x, y) => x.v - y.v);
  const ranks = new Array<number>(all.length);
  let tieTerm = 0;
  for (let i = 0; i < all.length; ) {
    let j = i;
    while (j + 1 < all.length && all[j + 1].v === all[i].v) j++;
    const t = j - i + 1;
    tieTerm += t ** 3 - t;
    for (let k = i; k <= j; k++) ranks[k] = (i + j) / 2 + 1;
    i = j + 1;
  }
  const n1 = a.length;
  const n2 = b.length;
  const r1 = all.reduce((sum, item, i) => sum + (item.g === 0 ? ranks[i] : 0), 0);
  const u = r1 - (n1 * (n1 + 1)) / 2;
  const mean = (n1 * n2) / 2;
  const n = n1 + n2;
  const sd = Math.sqrt(((n1 * n2) / 12) * (n + 1 - tieTerm / (n * (n - 1))));
  const z = (Math.abs(u - mean) - 0.5) / sd;
  return 2 * (1 - normalCdf(z));
}

function normalCdf(z: number): number {
  // Abramowitz-Stegun 7.1.26 (error below 1.5e-7): plenty for a p-value threshold.
  const t = 1 / (1 + 0.3275911 * (z / Math.SQRT2));
  const erf = 1 - (((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t) * Math.exp(-(z * z) / 2);
  return 0.5 * (1 + erf);
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** Header lines minus the two that differ by design on every answer. */
const comparableHeaders = (response: RawResponse) => response.headerLines.filter((line) => !/^(date|x-request-id):/i.test(line));

describe('enumeration and timing', () => {
  let service: ServiceHandle;
  let admin: AdminClient;
  let platform: PlatformRecord;
  let agent: AgentCredentials;
  /** An agent whose secret was rotated with a grace period: two hashes are live for it. */
  let graced: AgentCredentials;
  let port: number;
  let address = 0;

  beforeAll(async () => {
    service = await startService({
      mode: 'real',
      // Many wrong admin tokens below come from one address: lift the admin failure limit too.
      env: { TRUST_PROXY: 'true', RATE_LIMIT_AUTH_FAIL_POINTS: '1000000', RATE_LIMIT_TOKEN_POINTS: '1000000', ADMIN_AUTH_FAIL_POINTS: '1000000' },
    });
    admin = new AdminClient(service);
    ({ platform, agent } = await admin.seed(['orders:read']));
    graced = await admin.createAgent('in-grace');
    await admin.grant(graced.agent_id, platform.platform_id, ['orders:read']);
    graced = { ...graced, ...(await admin.rotateSecret(graced.agent_id, 3600)) };
    port = Number(new URL(service.publicUrl).port);
  });

  afterAll(async () => {
    await service?.dispose();
  });

  const unknownId = () => `agnt_kid_${randomBytes(16).toString('hex')}`;
  const raw = async (pathName: string, body: unknown) => {
    const result = await rawExchange(
      port,
      httpRequest('POST', pathName, { 'Content-Type': 'application/json', 'X-Forwarded-For': `198.51.100.${++address % 250}` }, JSON.stringify(body)),
      { timeoutMs: 10_000 },
    );
    expect(result.responses.length).toBe(1);
    return result.responses[0];
  };

  it('unknown api_key_id and wrong secret: byte-identical status line, headers and body, at both endpoints', async () => {
    for (const endpoint of ['/api/v1/auth/token', '/api/v1/auth/agents/me/platforms']) {
      const extra = endpoint.endsWith('token') ? { platform_id: platform.platform_id } : {};
      const answers: RawResponse[] = [];
      for (let i = 0; i < 3; i++) {
        answers.push(await raw(endpoint, { api_key_id: unknownId(), secret: agent.secret, ...extra }));
        answers.push(await raw(endpoint, { api_key_id: agent.api_key_id, secret: `wrong-${i}`, ...extra }));
        answers.push(await raw(endpoint, { api_key_id: agent.api_key_id, secret: `${agent.secret}x`, ...extra }));
      }
      const [first] = answers;
      expect(first.status).toBe(401);
      expect(contractErrorProblem(401, first.headers['content-type'], first.body)).toBeNull();
      expect(JSON.parse(first.body.toString()).error_code).toBe('invalid_credentials');
      for (const answer of answers) {
        expect(answer.statusLine).toBe(first.statusLine);
        expect(comparableHeaders(answer)).toEqual(comparableHeaders(first));
        expect(answer.body.equals(first.body)).toBe(true);
      }
      expect(first.body.toString()).not.toContain(agent.api_key_id);
    }
  });

  it('unknown api_key_id, wrong secret, and wrong secret during a rotation grace take the same time (interleaved samples, medians and Mann-Whitney U)', async () => {
    const url = `${service.publicUrl}/api/v1/auth/token`;
    const timeOne = async (body: unknown) => {
      const started = performance.now();
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': `203.0.113.${++address % 250}` },
        body: JSON.stringify(body),
      });
      await response.arrayBuffer();
      expect(response.status).toBe(401);
      return performance.now() - started;
    };
    const kinds = {
      unknown: () => timeOne({ api_key_id: unknownId(), secret: 'guess-secret-value', platform_id: platform.platform_id }),
      wrong: () => timeOne({ api_key_id: agent.api_key_id, secret: 'guess-secret-value', platform_id: platform.platform_id }),
      // Two hashes are live for this agent (new and previous secret): its refusal must not cost more.
      grace: () => timeOne({ api_key_id: graced.api_key_id, secret: 'guess-secret-value', platform_id: platform.platform_id }),
    };
    type Kind = keyof typeof kinds;
    for (let i = 0; i < 5; i++) await Promise.all(Object.values(kinds).map((run) => run())); // warm-up, discarded
    const samples: Record<Kind, number[]> = { unknown: [], wrong: [], grace: [] };
    for (let i = 0; i < SAMPLES; i++) {
      // Random order inside each triple, so drift in machine load falls on every side alike.
      const order = (Object.keys(kinds) as Kind[]).sort(() => Math.random() - 0.5);
      for (const kind of order) samples[kind].push(await kinds[kind]());
    }
    const compare = (a: Kind, b: Kind) => {
      const [ma, mb] = [median(samples[a]), median(samples[b])];
      const p = mannWhitneyP(samples[a], samples[b]);
      const summary = `median ${a} ${ma.toFixed(1)} ms, ${b} ${mb.toFixed(1)} ms, p=${p.toFixed(4)}`;
      // argon2id dominates every refusal (tens of ms): without the decoy verifications an unknown id would
      // answer in about a millisecond, and an agent in grace would cost one verification more.
      // Tolerances are wide on purpose (other suites load the same 2 cores); the failures they guard
      // against are a ratio of 10x (no decoy) or about 2x (one verification more).
      expect(Math.min(ma, mb), summary).toBeGreaterThan(5);
      expect(Math.max(ma, mb) / Math.min(ma, mb), summary).toBeLessThan(1.5);
      // Paired: the requests of a triple ran back to back, under the same load.
      const pairedRatio = Math.exp(median(samples[a].map((u, i) => Math.log(u / samples[b][i]))));
      expect(pairedRatio, `${summary}, paired ratio ${pairedRatio.toFixed(3)}`).toBeGreaterThan(1 / 1.4);
      expect(pairedRatio, `${summary}, paired ratio ${pairedRatio.toFixed(3)}`).toBeLessThan(1.4);
      expect(p, summary).toBeGreaterThan(1e-4);
    };
    compare('unknown', 'wrong');
    compare('unknown', 'grace');
    compare('wrong', 'grace');
  });

  it('wrong admin tokens of every length, and near misses, all get the same 401', async () => {
    const real = service.adminToken;
    // (No trailing-whitespace variant: HTTP strips it from field values, so it is the right token.)
    const candidates = new Set<string>(['', 'Bearer', 'Bearer ', real, `bearer ${real}`, `Bearer  ${real}`, `Basic ${real}`, `Bearer ${real.toUpperCase()}`]);
    for (let length = 0; length <= real.length + 16; length++) {
      candidates.add(`Bearer ${'a'.repeat(length)}`);
      candidates.add(`Bearer ${real.slice(0, length)}`); // every prefix of the right token
      candidates.add(`Bearer ${real}${'x'.repeat(Math.max(0, length - real.length))}`);
    }
    candidates.add(`Bearer ${real.slice(0, -1)}${real.at(-1) === 'a' ? 'b' : 'a'}`); // last character wrong
    // 8 KiB: past the HTTP core's header limit, which refuses it (431, its own page) before the service
    // sees it; when the service does see it, it is one more wrong token.
    const oversized = `Bearer ${'z'.repeat(8192)}`;
    candidates.add(oversized);
    candidates.delete(`Bearer ${real}`);
    const bodies = new Set<string>();
    for (const authorization of candidates) {
      const response = await fetch(`${service.adminUrl}/admin/v1/agents`, { headers: authorization ? { authorization } : {} });
      const text = await response.text();
      if (authorization === oversized && response.status === 431) continue;
      expect(response.status, `authorization "${authorization.slice(0, 60)}"`).toBe(401);
      expect(response.headers.get('www-authenticate')).toMatch(/^Bearer/);
      bodies.add(text);
    }
    expect([...bodies]).toEqual([JSON.stringify({ detail: 'Missing or invalid admin token.', error_code: 'unauthorized' })]);
    // The right token still works.
    expect((await fetch(`${service.adminUrl}/admin/v1/agents`, { headers: { authorization: `Bearer ${real}` } })).status).toBe(200);
  });

  it('every /admin/v1 route and method answers 401 without the token, and changes nothing', async () => {
    const before = JSON.stringify([(await admin.request('GET', '/admin/v1/agents')).body, (await admin.request('GET', '/admin/v1/platforms')).body, (await admin.request('GET', '/admin/v1/keys')).body]);
    const kid = (await admin.listKeys()).keys[0].kid;
    const paths = [
      '/admin/v1/platforms',
      `/admin/v1/platforms/${platform.platform_id}`,
      '/admin/v1/agents',
      `/admin/v1/agents/${agent.agent_id}`,
      `/admin/v1/agents/${agent.agent_id}/secret/rotate`,
      `/admin/v1/agents/${agent.agent_id}/grants`,
      `/admin/v1/agents/${agent.agent_id}/grants/${platform.platform_id}`,
      '/admin/v1/keys',
      '/admin/v1/keys/rotate',
      `/admin/v1/keys/${kid}/retire`,
      '/admin/v1/unknown',
      `/admin/v1/agents/${crypto.randomUUID()}`,
      '/admin/v1/',
    ];
    const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
    const body = JSON.stringify({ name: 'intruder', status: 'inactive', scopes: [], grace_seconds: 0 });
    const refusedOtherwise: string[] = [];
    for (const target of paths) {
      for (const method of methods) {
        for (const authorization of [undefined, 'Bearer wrong-token-value']) {
          const response = await fetch(`${service.adminUrl}${target}`, {
            method,
            headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
            body: method === 'GET' ? undefined : body,
          });
          const text = await response.text();
          if (response.status !== 401 || contractErrorProblem(401, response.headers.get('content-type') ?? undefined, text) !== null) {
            refusedOtherwise.push(`${method} ${target} (${authorization ? 'wrong token' : 'no token'}) -> ${response.status}`);
          }
        }
      }
    }
    // Nothing is learned without the token: not even which methods a path has (a 405 would tell).
    expect(refusedOtherwise).toEqual([]);
    const after = JSON.stringify([(await admin.request('GET', '/admin/v1/agents')).body, (await admin.request('GET', '/admin/v1/platforms')).body, (await admin.request('GET', '/admin/v1/keys')).body]);
    expect(after).toBe(before);
  });
});
