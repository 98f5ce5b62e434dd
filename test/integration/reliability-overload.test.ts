// Overload: a flood of cold credentials fills the argon2 queue. The excess is refused at once with 503 +
// Retry-After, warm credentials keep getting tokens, nothing answers another 5xx, and memory stays bounded.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { AdminClient, postJson } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { contractErrorProblem, rssMiB, serverErrorsIn } from '../support/faults.js';
import { metricSum } from '../../kit/metrics.js';
import { waitFor } from '../../kit/wait.js';

const MAX_QUEUE = 4;
const WAVES = 5;
const WAVE_SIZE = 200;
/** Generous: the service idles around 100-150 MiB; a leak or an unbounded queue shows far above. */
const RSS_LIMIT_MIB = 512;

describe('overload of the argon2 pool', () => {
  let service: ServiceHandle;
  let admin: AdminClient;

  beforeAll(async () => {
    service = await startService({
      mode: 'real',
      env: {
        ARGON2_THREADS: '1',
        ARGON2_MAX_QUEUE: String(MAX_QUEUE),
        WARMUP_SECONDS: '0', // the steady state: a fresh instance's slow start is argon2-warmup.test.ts
        TRUST_PROXY: 'true',
        RATE_LIMIT_AUTH_FAIL_POINTS: '1000000',
        RATE_LIMIT_TOKEN_POINTS: '1000000',
      },
    });
    admin = new AdminClient(service);
  });

  afterAll(async () => {
    await service?.dispose();
  });

  it('sheds cold floods with prompt 503 + Retry-After while warm requests keep getting 200, in bounded memory', async () => {
    const { platform, agent } = await admin.seed(['orders:read']);
    const url = `${service.publicUrl}/api/v1/auth/token`;
    const warmBody = { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id };
    expect((await postJson(url, warmBody, { 'x-forwarded-for': '192.0.2.1' })).status).toBe(200);
    const rssBaseline = rssMiB(service.process.pid!);

    let flooding = true;
    const warm: { status: number; ms: number }[] = [];
    const warmLoop = (async () => {
      while (flooding) {
        const started = performance.now();
        const response = await postJson(url, warmBody, { 'x-forwarded-for': '192.0.2.1' });
        warm.push({ status: response.status, ms: performance.now() - started });
      }
    })();

    const cold: { status: number; ms: number; retryAfter: string | null; problem: string | null }[] = [];
    let rssPeak = rssBaseline;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, rssMiB(service.process.pid!))), 100);
    let n = 0;
    for (let wave = 0; wave < WAVES; wave++) {
      await Promise.all(
        Array.from({ length: WAVE_SIZE }, async () => {
          const i = ++n;
          // Half wrong secrets of a real agent, half unknown ids, each from its own address.
          const body =
            i % 2 === 0
              ? { ...warmBody, secret: `wrong-${i}` }
              : { api_key_id: `agnt_kid_${randomBytes(16).toString('hex')}`, secret: 'guess', platform_id: platform.platform_id };
          const started = performance.now();
          const response = await postJson(url, body, { 'x-forwarded-for': `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}` });
          cold.push({
            status: response.status,
            ms: performance.now() - started,
            retryAfter: response.headers.get('retry-after'),
            problem: contractErrorProblem(response.status, response.headers.get('content-type') ?? undefined, response.text),
          });
        }),
      );
    }
    flooding = false;
    await warmLoop;
    clearInterval(sampler);

    const shed = cold.filter((r) => r.status === 503);
    const refusedCredentials = cold.filter((r) => r.status === 401);
    // Every answer is a contract error: 401 for the few the queue took, 503 for the excess, nothing else.
    expect(cold.filter((r) => r.status !== 401 && r.status !== 503)).toEqual([]);
    expect(cold.filter((r) => r.problem !== null)).toEqual([]);
    expect(shed.length).toBeGreaterThan(WAVES * WAVE_SIZE * 0.5);
    expect(refusedCredentials.length).toBeGreaterThan(0);
    for (const r of shed) expect(r.retryAfter).toMatch(/^[1-9]\d*$/);
    // Refused without waiting for argon2: the queue-full answers come faster than the refusals that did
    // wait (compared with each other, not with a clock: the machine's load moves both alike). That no
    // argon2 task ran for them is checked on the pool's own counter below.
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
    expect(median(shed.map((r) => r.ms))).toBeLessThan(median(refusedCredentials.map((r) => r.ms)));

    // Warm credentials were served all along.
    expect(warm.length).toBeGreaterThan(10);
    expect(warm.filter((r) => r.status !== 200)).toEqual([]);

    // Memory stayed bounded, and the queue drained.
    expect(rssPeak).toBeLessThan(RSS_LIMIT_MIB);
    expect(rssPeak - rssBaseline).toBeLessThan(256);
    const text = await (await fetch(`${service.adminUrl}/metrics`)).text();
    expect(metricSum(text, 'ace_worker_tasks_rejected_total', { pool: 'argon2' })).toBeGreaterThanOrEqual(shed.length);
    await waitFor('the argon2 queue to drain', async () => {
      const now = await (await fetch(`${service.adminUrl}/metrics`)).text();
      return metricSum(now, 'ace_worker_queue_depth', { pool: 'argon2' }) === 0;
    }, 10_000);
    expect(serverErrorsIn(text)).toEqual([]);

    // And afterwards cold credentials are served normally again.
    const fresh = await admin.createAgent('after-flood');
    await admin.grant(fresh.agent_id, platform.platform_id, ['orders:read']);
    const after = await postJson(url, { api_key_id: fresh.api_key_id, secret: fresh.secret, platform_id: platform.platform_id });
    expect(after.status).toBe(200);
  });
});

// The signing line: with no room to wait (SIGN_MAX_QUEUE=0) a burst of warm tokens fills the one signing
// slot at once; the rest are refused like a full argon2 queue (503 + Retry-After, contract shape) and
// counted in ace_worker_tasks_rejected_total{pool="sign"}, and the service signs again right after.
describe('overload of the signing line', () => {
  let service: ServiceHandle;
  let admin: AdminClient;

  beforeAll(async () => {
    service = await startService({
      mode: 'real',
      env: { SIGN_MAX_QUEUE: '0', RATE_LIMIT_TOKEN_POINTS: '1000000' },
    });
    admin = new AdminClient(service);
  });

  afterAll(async () => {
    await service?.dispose();
  });

  it('refuses what cannot wait with 503 + Retry-After, counts it, and signs again after the burst', async () => {
    const { platform, agent } = await admin.seed(['orders:read']);
    const url = `${service.publicUrl}/api/v1/auth/token`;
    const body = { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id };
    expect((await postJson(url, body)).status).toBe(200); // warm from here on: no argon2 in the burst
    const metrics = async () => (await fetch(`${service.adminUrl}/metrics`)).text();
    const rejectedBefore = metricSum(await metrics(), 'ace_worker_tasks_rejected_total', { pool: 'sign' });

    const answers = await Promise.all(Array.from({ length: 100 }, () => postJson(url, body)));
    const refused = answers.filter((a) => a.status === 503);
    expect(answers.every((a) => a.status === 200 || a.status === 503)).toBe(true);
    expect(refused.length).toBeGreaterThan(0);
    expect(answers.some((a) => a.status === 200)).toBe(true);
    for (const a of refused) {
      expect(contractErrorProblem(503, a.headers.get('content-type') ?? undefined, a.text)).toBeNull();
      expect(a.body.error_code).toBe('service_unavailable');
      expect(a.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    }
    expect(metricSum(await metrics(), 'ace_worker_tasks_rejected_total', { pool: 'sign' })).toBe(rejectedBefore + refused.length);
    expect((await postJson(url, body)).status).toBe(200);
  });
});
