// The failed-authentication budget per client address is reserved before argon2 runs: a burst of
// concurrent wrong secrets from one address costs at most that budget in argon2 verifications (counted by
// ace_credential_checks_total), the rest is refused with 429 + Retry-After, and the address can hold only
// a small share of the argon2 queue, so another address's cold login still gets its token.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { contractErrorProblem } from '../support/faults.js';
import { metricSum } from '../../kit/metrics.js';

const BUDGET = 20;
const BURST = 300;

describe('failure budget reserved before argon2', () => {
  let service: ServiceHandle;
  let admin: AdminClient;
  let platform: PlatformRecord;
  let agent: AgentCredentials;

  beforeAll(async () => {
    service = await startService({
      mode: 'real',
      env: { TRUST_PROXY: 'true', RATE_LIMIT_AUTH_FAIL_POINTS: String(BUDGET), ARGON2_THREADS: '1' },
    });
    admin = new AdminClient(service);
    ({ platform, agent } = await admin.seed(['orders:read']));
  });

  afterAll(async () => {
    await service?.dispose();
  });

  const token = (secret: string, address: string, who = agent) =>
    postJson(
      `${service.publicUrl}/api/v1/auth/token`,
      { api_key_id: who.api_key_id, secret, platform_id: platform.platform_id },
      { 'x-forwarded-for': address },
    );
  const checks = async () => metricSum(await (await fetch(`${service.adminUrl}/metrics`)).text(), 'ace_credential_checks_total');

  it(`${BURST} concurrent wrong secrets from one address run at most ${BUDGET} argon2 checks; the rest get 429; others still log in`, async () => {
    const cold = await admin.createAgent('cold-elsewhere');
    await admin.grant(cold.agent_id, platform.platform_id, ['orders:read']);
    const before = await checks();

    const burst = await Promise.all(Array.from({ length: BURST }, (_, i) => token(`wrong-${i}`, '203.0.113.7')));
    const byStatus = new Map<number, number>();
    for (const r of burst) byStatus.set(r.status, (byStatus.get(r.status) ?? 0) + 1);
    const summary = JSON.stringify(Object.fromEntries(byStatus));
    const refused = burst.filter((r) => r.status === 401).length;
    // Only 401 (checked, wrong) and 429 (refused before argon2): no 503 from a flooded queue.
    expect([...byStatus.keys()].filter((s) => s !== 401 && s !== 429), summary).toEqual([]);
    expect(refused, summary).toBeGreaterThan(0);
    expect(refused, summary).toBeLessThanOrEqual(BUDGET);
    for (const r of burst.filter((x) => x.status === 429)) {
      expect(contractErrorProblem(429, r.headers.get('content-type') ?? undefined, r.text)).toBeNull();
      expect(r.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    }
    // Every argon2 check of the burst is one of its 401s: the budget bounds the argon2 work.
    const ran = (await checks()) - before;
    expect(ran, summary).toBe(refused);

    // Refusals that are ours (the address's share of the argon2 queue) give their point back, so the burst
    // may leave some budget: spend it with wrong secrets, one at a time, until the first 429.
    let failures = refused;
    for (;;) {
      const status = (await token(`wrong-after-${failures}`, '203.0.113.7')).status;
      if (status === 429) break;
      expect(status).toBe(401);
      failures++;
      expect(failures, 'wrong secrets answered 401 never exceed the budget').toBeLessThanOrEqual(BUDGET);
    }
    // The address is now out of budget, even with the right secret; another address logs in cold.
    expect((await token(agent.secret, '203.0.113.7')).status).toBe(429);
    const elsewhere = await token(cold.secret, '198.51.100.23', cold);
    expect(elsewhere.status, elsewhere.text).toBe(200);
  });

  it('a successful cold login gives its reserved point back', async () => {
    const address = '198.51.100.77';
    // Fill the budget but one with failures, then succeed many times cold (a new agent each time):
    // without the refund, the successes would use the last point and the next failure would be a 429.
    for (let i = 0; i < BUDGET - 1; i++) expect((await token(`wrong-${i}`, address)).status).toBe(401);
    for (let i = 0; i < 3; i++) {
      const another = await admin.createAgent(`refund-${i}`);
      await admin.grant(another.agent_id, platform.platform_id, ['orders:read']);
      expect((await token(another.secret, address, another)).status).toBe(200);
    }
    expect((await token('wrong-last', address)).status).toBe(401);
    expect((await token('wrong-over', address)).status).toBe(429);
  });
});
