// A fleet behind one address (one NAT egress, as a Kubernetes cluster's): fresh agents with correct secrets,
// many requests at once. Points of the address's failure budget held by verifications still in flight are
// not failures: they may earn a short Retry-After (or the argon2 share's), never the lockout, which only
// failed authentications lead to. Wrong secrets still lock out (abuse-lockout.test.ts,
// auth-failure-budget.test.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as delay } from 'node:timers/promises';
import { AdminClient, postJson, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { metricSum } from '../../kit/metrics.js';

const AGENTS = 8;
const LOOPS_PER_AGENT = 4;
const TOKENS_PER_LOOP = 10;
/** Past this a Retry-After is the lockout's (the window is 60 s), not a pending verification's. */
const SHORT_RETRY_AFTER = 5;

interface Answer {
  agent: number;
  status: number;
  retryAfter: number | undefined;
  startedAt: number;
  endedAt: number;
}

describe('a fleet behind one address with correct secrets', () => {
  let service: ServiceHandle;
  let platform: PlatformRecord;
  const agents: AgentCredentials[] = [];

  beforeAll(async () => {
    // Default limits (RATE_LIMIT_AUTH_FAIL_POINTS 20 per 60 s, ARGON2_MAX_PER_ADDRESS): what a fleet meets.
    service = await startService({ mode: 'real', env: { TRUST_PROXY_CIDRS: '127.0.0.1' } });
    const admin = new AdminClient(service);
    let first: AgentCredentials;
    ({ platform, agent: first } = await admin.seed(['orders:read']));
    agents.push(first);
    for (let i = 1; i < AGENTS; i++) {
      const agent = await admin.createAgent(`fleet-${i}`);
      await admin.grant(agent.agent_id, platform.platform_id, ['orders:read']);
      agents.push(agent);
    }
  });

  afterAll(async () => {
    await service?.dispose();
  });

  it(`${AGENTS} fresh agents × ${LOOPS_PER_AGENT} loops from one address: no 429 past each agent's first verification, never a long Retry-After, no lockout`, async () => {
    const answers: Answer[] = [];
    const loop = async (index: number) => {
      const agent = agents[index];
      for (let tokens = 0; tokens < TOKENS_PER_LOOP; ) {
        const startedAt = performance.now();
        const response = await postJson(
          `${service.publicUrl}/api/v1/auth/token`,
          { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id },
          { 'x-forwarded-for': '203.0.113.50' },
        );
        const header = response.headers.get('retry-after');
        const retryAfter = header === null ? undefined : Number(header);
        answers.push({ agent: index, status: response.status, retryAfter, startedAt, endedAt: performance.now() });
        if (response.status === 200) tokens++;
        else if (response.status === 429 && retryAfter !== undefined && retryAfter < SHORT_RETRY_AFTER) await delay(retryAfter * 1000); // as the server asks
        else return; // anything else (a lockout's Retry-After included) fails the test below
      }
    };
    await Promise.all(agents.flatMap((_, index) => Array.from({ length: LOOPS_PER_AGENT }, () => loop(index))));

    const byStatus: Record<string, number> = {};
    for (const a of answers) {
      const key = a.retryAfter === undefined ? String(a.status) : `${a.status} retry-after ${a.retryAfter}`;
      byStatus[key] = (byStatus[key] ?? 0) + 1;
    }
    const summary = JSON.stringify(byStatus);
    expect(answers.filter((a) => a.status !== 200 && a.status !== 429), summary).toEqual([]);
    expect(Math.max(0, ...answers.map((a) => a.retryAfter ?? 0)), summary).toBeLessThan(SHORT_RETRY_AFTER);
    expect(answers.filter((a) => a.status === 200).length, summary).toBe(AGENTS * LOOPS_PER_AGENT * TOKENS_PER_LOOP);
    // Once an agent has been verified, none of its requests sent after that is refused.
    for (let index = 0; index < AGENTS; index++) {
      const own = answers.filter((a) => a.agent === index);
      const firstToken = Math.min(...own.filter((a) => a.status === 200).map((a) => a.endedAt));
      expect(own.filter((a) => a.status === 429 && a.startedAt > firstToken), `agent ${index}: ${summary}`).toEqual([]);
    }
    const metrics = await (await fetch(`${service.adminUrl}/metrics`)).text();
    expect(metricSum(metrics, 'ace_rate_limit_refusals_total', { limiter: 'auth_fail_per_address' }), summary).toBe(0);
  });
});
