// Admin token guessing on the internal port: after ADMIN_AUTH_FAIL_POINTS wrong tokens in a window, an
// address gets 429 + Retry-After (the right token included) until the window passes; counted in
// metrics, logged with the address and never the token. Other addresses are not affected.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { startService, type ServiceHandle } from '../support/service.js';
import { metricSum } from '../../kit/metrics.js';
import { waitFor } from '../../kit/wait.js';

const LIMIT = 3;

const adminGet = (base: string, authorization: string | undefined, headers: Record<string, string> = {}) =>
  fetch(`${base}/admin/v1/agents`, { headers: { ...(authorization === undefined ? {} : { authorization }), ...headers } });

describe('admin token limit (Redis)', () => {
  let service: ServiceHandle;
  let viaIpv6: string;

  beforeAll(async () => {
    // Listening on :: lets the test call from a second address (::1) next to 127.0.0.1.
    service = await startService({ mode: 'real', env: { ADMIN_HOST: '::', ADMIN_AUTH_FAIL_POINTS: String(LIMIT), TRUST_PROXY: 'true' } });
    viaIpv6 = `http://[::1]:${service.env.ADMIN_PORT}`;
  });
  afterAll(async () => {
    await service?.dispose();
  });

  it('answers 429 with Retry-After past the budget, refuses the right token while blocked, and spares other addresses', async () => {
    const wrongTokens = Array.from({ length: LIMIT + 1 }, () => `Bearer guess-${randomBytes(12).toString('hex')}`);
    const statuses: number[] = [];
    // The admin port trusts no proxy: a rotating X-Forwarded-For changes nothing.
    for (const [i, token] of wrongTokens.entries()) statuses.push((await adminGet(service.adminUrl, token, { 'x-forwarded-for': `198.51.100.${i}` })).status);
    expect(statuses).toEqual([...new Array(LIMIT).fill(401), 429]);

    const blocked = await adminGet(service.adminUrl, `Bearer ${service.adminToken}`);
    expect(blocked.status).toBe(429);
    const retryAfter = Number(blocked.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(blocked.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await blocked.json()).toEqual({ detail: 'Too many requests.', error_code: 'rate_limited' });

    // Another address is not blocked: the right token works, a wrong one is a plain 401.
    expect((await adminGet(viaIpv6, `Bearer ${service.adminToken}`)).status).toBe(200);
    expect((await adminGet(viaIpv6, 'Bearer nope-nope-nope')).status).toBe(401);

    // Health and metrics stay reachable from the blocked address (no token there).
    const metrics = await (await fetch(`${service.adminUrl}/metrics`)).text();
    // LIMIT wrong tokens from 127.0.0.1 and one from ::1; the (LIMIT+1)-th was refused before its token was read.
    expect(metricSum(metrics, 'ace_admin_auth_failures_total')).toBe(LIMIT + 1);
    expect(metricSum(metrics, 'ace_rate_limit_refusals_total', { limiter: 'admin_auth_fail_per_address' })).toBe(2);

    await waitFor('the warn lines', () => service.output().split('\n').filter((l) => l.includes('wrong bearer token')).length >= LIMIT + 1);
    const lines = service.output().split('\n').filter((l) => l.includes('wrong bearer token'));
    expect(lines.map((l) => JSON.parse(l).address)).toContain('127.0.0.1');
    expect(JSON.parse(lines[0]).level).toBe(40);
    for (const token of wrongTokens) expect(service.output()).not.toContain(token.slice('Bearer '.length));
  });
});

describe('admin token limit (in-process, no Redis)', () => {
  let service: ServiceHandle;

  beforeAll(async () => {
    service = await startService({ mode: 'real', env: { REDIS_URL: '', ADMIN_AUTH_FAIL_POINTS: '1', ADMIN_AUTH_FAIL_WINDOW_SECONDS: '1' } });
  });
  afterAll(async () => {
    await service?.dispose();
  });

  it('blocks after the budget and lets the right token in again once the window passed', async () => {
    expect((await adminGet(service.adminUrl, 'Bearer wrong-wrong-wrong')).status).toBe(401);
    expect((await adminGet(service.adminUrl, undefined)).status).toBe(429);
    await waitFor('the window to pass', async () => (await adminGet(service.adminUrl, `Bearer ${service.adminToken}`)).status === 200, 10_000, 200);
  });
});
