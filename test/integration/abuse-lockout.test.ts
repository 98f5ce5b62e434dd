// A locked-out address could still be let in. The verified-secret memory (the warm path) ran
// before the failure limiter, so an address that had spent its failure budget still got a token with a
// secret verified recently. Now a locked-out address gets 429 for every credential request, the right
// secret included, until its window passes (docs/decisions.md, Lockout); other addresses are unaffected.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { contractErrorProblem } from '../support/faults.js';
import { metricSum } from '../../kit/metrics.js';
import { waitFor } from '../../kit/wait.js';

const BUDGET = 3;
const WINDOW_SECONDS = 10;

describe('lockout before the verified-secret memory', () => {
  let service: ServiceHandle;
  let platform: PlatformRecord;
  let agent: AgentCredentials;

  beforeAll(async () => {
    service = await startService({
      mode: 'real',
      env: {
        RATE_LIMIT_AUTH_FAIL_POINTS: String(BUDGET),
        RATE_LIMIT_AUTH_FAIL_WINDOW_SECONDS: String(WINDOW_SECONDS),
        // The test chooses its client addresses through X-Forwarded-For.
        TRUST_PROXY_CIDRS: '127.0.0.1',
      },
    });
    const admin = new AdminClient(service);
    ({ platform, agent } = await admin.seed(['orders:read']));
  });

  afterAll(async () => {
    await service?.dispose();
  });

  const tokenFrom = (address: string, secret: string) =>
    postJson(`${service.publicUrl}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret, platform_id: platform.platform_id }, { 'x-forwarded-for': address });
  const listingFrom = (address: string, secret: string) =>
    postJson(`${service.publicUrl}/api/v1/auth/agents/me/platforms`, { api_key_id: agent.api_key_id, secret }, { 'x-forwarded-for': address });

  it('a locked-out address gets 429 for every credential request, a remembered secret included, until its window passes', async () => {
    const attacker = '203.0.113.7';
    // The right secret is verified once (now remembered: the warm path), from the same address.
    expect((await tokenFrom(attacker, agent.secret)).status).toBe(200);
    const metrics = async () => fetch(`${service.adminUrl}/metrics`).then((r) => r.text());
    const warmHits = metricSum(await metrics(), 'ace_cache_requests_total', { cache: 'verified', result: 'hit' });
    expect((await tokenFrom(attacker, agent.secret)).status).toBe(200);
    expect(metricSum(await metrics(), 'ace_cache_requests_total', { cache: 'verified', result: 'hit' })).toBe(warmHits + 1);

    // The budget spent: BUDGET wrong secrets are 401, the next one 429.
    for (let i = 0; i < BUDGET; i++) expect((await tokenFrom(attacker, `wrong-${i}`)).status).toBe(401);
    const refused = await tokenFrom(attacker, 'wrong-again');
    expect(refused.status).toBe(429);

    // Locked out: the remembered secret gets 429 too, on both credential endpoints, in the Error shape.
    const right = await tokenFrom(attacker, agent.secret);
    expect(right.status).toBe(429);
    expect(contractErrorProblem(right.status, right.headers.get('content-type') ?? undefined, right.text)).toBeNull();
    expect(right.body.error_code).toBe('rate_limited');
    expect(Number(right.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(right.headers.get('retry-after'))).toBeLessThanOrEqual(WINDOW_SECONDS);
    expect((await listingFrom(attacker, agent.secret)).status).toBe(429);
    const limited = metricSum(await metrics(), 'ace_rate_limit_refusals_total', { limiter: 'auth_fail_per_address' });
    expect(limited).toBeGreaterThanOrEqual(3);

    // Another address is not locked out by it: same agent, same secret.
    expect((await tokenFrom('198.51.100.20', agent.secret)).status).toBe(200);

    // Once the window has passed the address is let in again.
    await waitFor('the lockout window to pass', async () => (await tokenFrom(attacker, agent.secret)).status === 200, WINDOW_SECONDS * 1000 + 10_000, 500);
  });

  it('a correct secret on the last point of the budget is not a lockout', async () => {
    const address = '203.0.113.8';
    for (let i = 0; i < BUDGET - 1; i++) expect((await tokenFrom(address, `wrong-${i}`)).status).toBe(401);
    // The next cold check takes the last point; a fresh secret (rotation) makes it cold.
    const admin = new AdminClient(service);
    const rotated = await admin.rotateSecret(agent.agent_id, 0);
    expect((await tokenFrom(address, rotated.secret)).status).toBe(200);
    // It gave the point back: still let in, warm.
    expect((await tokenFrom(address, rotated.secret)).status).toBe(200);
  });
});
