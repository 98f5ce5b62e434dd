// A fresh instance slow-starts: in its warm-up (WARMUP_SECONDS), cold credential checks that find the
// argon2 queue full wait in a longer line (what the pool verifies in WARMUP_MAX_WAIT_MS) instead of a 503
// at once. A new pod gets its whole share of a fleet at once, and agents no instance has verified yet all
// need argon2 (the verified-secret memory in Redis is empty for them: here they were just created).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { AdminClient, postJson } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { contractErrorProblem, serverErrorsIn } from '../support/faults.js';
import { metricSum } from '../../kit/metrics.js';

/** The usual line: one thread and four places, so the burst below is nine times what it holds. */
const POOL = { ARGON2_THREADS: '1', ARGON2_MAX_QUEUE: '4' };
const AGENTS = 45;
const FLOOD = 150;

const env = (warmup: Record<string, string>) => ({
  ...POOL,
  ...warmup,
  TRUST_PROXY: 'true',
  RATE_LIMIT_AUTH_FAIL_POINTS: '1000000',
  RATE_LIMIT_TOKEN_POINTS: '1000000',
});

interface Answer {
  status: number;
  retryAfter: string | null;
  problem: string | null;
}

/** One token request from its own address (one address may hold only one place of this small line). */
async function ask(url: string, body: object, i: number): Promise<Answer> {
  const response = await postJson(url, body, { 'x-forwarded-for': `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}` });
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    problem: response.status === 200 ? null : contractErrorProblem(response.status, response.headers.get('content-type') ?? undefined, response.text),
  };
}

const byStatus = (answers: Answer[]) => JSON.stringify(Object.fromEntries([...new Set(answers.map((a) => a.status))].map((s) => [s, answers.filter((a) => a.status === s).length])));

/** `AGENTS` agents created on `service`, then one cold token request each, all at once. */
async function coldBurst(service: ServiceHandle): Promise<Answer[]> {
  const admin = new AdminClient(service);
  const { platform } = await admin.seed(['orders:read']);
  const agents = [];
  for (let i = 0; i < AGENTS; i++) {
    const agent = await admin.createAgent(`fleet-${i}`);
    await admin.grant(agent.agent_id, platform.platform_id, ['orders:read']);
    agents.push(agent);
  }
  const url = `${service.publicUrl}/api/v1/auth/token`;
  return Promise.all(agents.map((agent, i) => ask(url, { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id }, i)));
}

const warmingUp = async (service: ServiceHandle) => metricSum(await (await fetch(`${service.adminUrl}/metrics`)).text(), 'ace_argon2_warming_up');

describe('slow start of a fresh instance', () => {
  let warming: ServiceHandle;
  let bounded: ServiceHandle;
  let noWarmup: ServiceHandle;

  beforeAll(async () => {
    [warming, bounded, noWarmup] = await Promise.all([
      // A wait long enough for the whole burst even on a starved machine.
      startService({ mode: 'real', env: env({ WARMUP_SECONDS: '3600', WARMUP_MAX_WAIT_MS: '60000' }) }),
      // A short wait: a flood the pool cannot verify within it.
      startService({ mode: 'real', env: env({ WARMUP_SECONDS: '3600', WARMUP_MAX_WAIT_MS: '1000' }) }),
      // No slow start: the usual line alone.
      startService({ mode: 'real', env: env({ WARMUP_SECONDS: '0' }) }),
    ]);
  });

  afterAll(async () => {
    await Promise.all([warming?.dispose(), bounded?.dispose(), noWarmup?.dispose()]);
  });

  it('a cold burst nine times the argon2 queue is served, all 200, instead of 503 for a full queue', async () => {
    expect(await warmingUp(warming)).toBe(1);
    const answers = await coldBurst(warming);
    expect(answers.filter((a) => a.status !== 200), byStatus(answers)).toEqual([]);
    const metrics = await (await fetch(`${warming.adminUrl}/metrics`)).text();
    expect(serverErrorsIn(metrics)).toEqual([]);
  });

  it('without the warm-up (WARMUP_SECONDS=0) the same burst meets 503 for a full queue, and the gauge says 0', async () => {
    expect(await warmingUp(noWarmup)).toBe(0);
    const answers = await coldBurst(noWarmup);
    expect(answers.filter((a) => a.status !== 200 && a.status !== 503), byStatus(answers)).toEqual([]);
    expect(answers.filter((a) => a.status === 503).length, byStatus(answers)).toBeGreaterThan(0);
  });

  it('what the pool cannot verify within WARMUP_MAX_WAIT_MS gets 503 with Retry-After, never another error', async () => {
    const { platform } = await new AdminClient(bounded).seed(['orders:read']);
    const url = `${bounded.publicUrl}/api/v1/auth/token`;
    // Unknown key ids: each costs one argon2 verification (of the decoy hash) and is refused 401.
    const answers = await Promise.all(
      Array.from({ length: FLOOD }, (_, i) =>
        ask(url, { api_key_id: `agnt_kid_${randomBytes(16).toString('hex')}`, secret: 'guess', platform_id: platform.platform_id }, 1000 + i),
      ),
    );
    expect(answers.filter((a) => a.status !== 401 && a.status !== 503), byStatus(answers)).toEqual([]);
    expect(answers.filter((a) => a.problem !== null)).toEqual([]);
    const shed = answers.filter((a) => a.status === 503);
    expect(shed.length, byStatus(answers)).toBeGreaterThan(0);
    for (const a of shed) expect(a.retryAfter).toMatch(/^[1-9]\d*$/);
    const metrics = await (await fetch(`${bounded.adminUrl}/metrics`)).text();
    expect(serverErrorsIn(metrics)).toEqual([]);
  });
});
