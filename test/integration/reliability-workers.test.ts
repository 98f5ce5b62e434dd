// A crypto worker thread that crashes or hangs is replaced: the request it carried gets a 503 with
// Retry-After, the pool keeps serving. Faults come from a test-only worker (support/fault-worker.ts, loaded
// by the harness with `faultWorker: true`): the secret "fault:crash" ends the argon2 thread, "fault:hang"
// wedges it. The shipped worker has no such hook, whatever the environment.
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SETTINGS } from '../../src/config/settings.js';
import { AdminClient, postJson, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { contractErrorProblem, serverErrorsIn } from '../support/faults.js';
import { metricSum } from '../../kit/metrics.js';
import { waitFor } from '../../kit/wait.js';

const TASK_TIMEOUT_MS = 1500;
/** The shortest ARGON2_TASK_TIMEOUT_MS the settings allow: every allowed value must work. */
const MIN_TASK_TIMEOUT_MS = (SETTINGS.find((s) => s.env === 'ARGON2_TASK_TIMEOUT_MS') as { min: number }).min;

describe('crypto worker faults', () => {
  let service: ServiceHandle;
  let admin: AdminClient;
  let platform: PlatformRecord;
  let agent: AgentCredentials;
  let address = 0;

  beforeAll(async () => {
    service = await startService({
      mode: 'real',
      faultWorker: true,
      env: {
        ARGON2_THREADS: '1', // the only thread dies: the pool must replace it to serve again
        ARGON2_TASK_TIMEOUT_MS: String(TASK_TIMEOUT_MS),
        TRUST_PROXY: 'true',
        RATE_LIMIT_AUTH_FAIL_POINTS: '100000',
        RATE_LIMIT_TOKEN_POINTS: '100000',
      },
    });
    admin = new AdminClient(service);
    ({ platform, agent } = await admin.seed(['orders:read']));
  });

  afterAll(async () => {
    await service?.dispose();
  });

  const token = (secret: string, apiKeyId = agent.api_key_id) =>
    postJson(
      `${service.publicUrl}/api/v1/auth/token`,
      { api_key_id: apiKeyId, secret, platform_id: platform.platform_id },
      { 'x-forwarded-for': `198.51.100.${++address % 250}` },
    );
  const timed = async <T>(fn: () => Promise<T>) => {
    const started = performance.now();
    const value = await fn();
    return { ms: performance.now() - started, value };
  };
  const metrics = async () => (await fetch(`${service.adminUrl}/metrics`)).text();
  const expect503 = (response: { status: number; headers: Headers; text: string; body: any }) => {
    expect(response.status).toBe(503);
    expect(contractErrorProblem(503, response.headers.get('content-type') ?? undefined, response.text)).toBeNull();
    expect(response.body.error_code).toBe('service_unavailable');
    expect(response.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
  };
  /** Argon2 work that needs a live thread: a fresh agent (cold), and a wrong secret. */
  const argon2Serves = async () => {
    const fresh = await admin.createAgent('fresh'); // hashing runs in the argon2 pool too
    await admin.grant(fresh.agent_id, platform.platform_id, ['orders:read']);
    expect((await token(fresh.secret, fresh.api_key_id)).status).toBe(200);
    expect((await token('wrong-secret')).status).toBe(401);
  };

  it('a crashed worker: its request gets 503 at once, the next ones are served by a new thread', async () => {
    await argon2Serves();
    const rejectedBefore = metricSum(await metrics(), 'ace_worker_tasks_rejected_total', { pool: 'argon2' });

    const crashed = await timed(() => token('fault:crash'));
    expect503(crashed.value);
    expect(crashed.ms).toBeLessThan(TASK_TIMEOUT_MS); // a crash is noticed, not waited out

    await argon2Serves();
    // Several crashes in a row do not exhaust anything.
    for (let i = 0; i < 4; i++) expect503(await token('fault:crash'));
    await argon2Serves();

    expect(metricSum(await metrics(), 'ace_worker_tasks_rejected_total', { pool: 'argon2' })).toBeGreaterThanOrEqual(rejectedBefore + 5);
    expect((await fetch(`${service.adminUrl}/readyz`)).status).toBe(200);
  });

  it('a crash affects only its own request: argon2 work queued behind it still completes', async () => {
    const [crashed, ...others] = await Promise.all([
      token('fault:crash'),
      token(agent.secret),
      token('wrong-1'),
      token('wrong-2'),
    ]);
    expect503(crashed);
    // The valid secret may be answered from memory (verified earlier) or by argon2: either way 200.
    expect(others.map((r) => r.status)).toEqual([200, 401, 401]);
  });

  it('a hung worker: its request gets 503 after the task deadline; warm requests are served meanwhile; the thread is replaced', async () => {
    expect((await token(agent.secret)).status).toBe(200); // warm: remembered, no argon2 needed
    const hung = timed(() => token('fault:hang'));
    // While the only argon2 thread is wedged, warm credentials never touch it.
    const warmDuringHang = await Promise.all(Array.from({ length: 5 }, () => timed(() => token(agent.secret))));
    for (const warm of warmDuringHang) {
      expect(warm.value.status).toBe(200);
      expect(warm.ms).toBeLessThan(TASK_TIMEOUT_MS);
    }
    const { ms, value } = await hung;
    expect503(value);
    expect(ms).toBeGreaterThanOrEqual(TASK_TIMEOUT_MS - 100);
    expect(ms).toBeLessThan(TASK_TIMEOUT_MS + 3000);

    await waitFor('/readyz 200 after the hung thread was replaced', async () => (await fetch(`${service.adminUrl}/readyz`)).status === 200, 10_000);
    await argon2Serves();
    const burst = await Promise.all(['a', 'b', 'c', 'd'].map((s) => token(`wrong-${s}`)));
    expect(burst.map((r) => r.status)).toEqual([401, 401, 401, 401]);
  });

  it('never answered 500 and never exited', async () => {
    expect(serverErrorsIn(await metrics())).toEqual([]);
    expect(service.process.exitCode).toBeNull();
    expect((await fetch(`${service.adminUrl}/healthz`)).status).toBe(200);
  });
});

describe('the shipped worker', () => {
  it('has no fault hook: "fault:crash" and "fault:hang" are ordinary wrong secrets, even with ACE_FAULT_INJECTION=on', async () => {
    const service = await startService({ mode: 'real', env: { ACE_FAULT_INJECTION: 'on', TRUST_PROXY: 'true' } });
    try {
      const admin = new AdminClient(service);
      const { platform, agent } = await admin.seed(['orders:read']);
      for (const secret of ['fault:crash', 'fault:hang', 'fault:crash']) {
        const response = await postJson(
          `${service.publicUrl}/api/v1/auth/token`,
          { api_key_id: agent.api_key_id, secret, platform_id: platform.platform_id },
          { 'x-forwarded-for': '198.51.100.9' },
        );
        expect(response.status, response.text).toBe(401);
      }
      expect(metricSum(await (await fetch(`${service.adminUrl}/metrics`)).text(), 'ace_worker_tasks_rejected_total', { pool: 'argon2' })).toBe(0);
    } finally {
      await service.dispose();
    }
  });
});

describe('hung-thread replacement under CPU contention, threads slow to load', () => {
  // Busy loops beside the service for the whole block: the 2-core CI runner at full contention.
  let hogs: ChildProcess[] = [];
  let service: ServiceHandle;
  let platform: PlatformRecord;
  let agent: AgentCredentials;
  let address = 0;
  const timeoutMs = MIN_TASK_TIMEOUT_MS;

  beforeAll(async () => {
    hogs = Array.from({ length: 2 }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
    // Each thread takes longer to load its module than a task may run: a deadline counted from before the
    // load would terminate a thread mid-load (V8 aborts the process: SIGABRT, exit 134) or fail start-up
    // with "The service is busy" (the authenticator's first hash).
    service = await startService({
      mode: 'real',
      faultWorker: true,
      env: {
        FAULT_WORKER_LOAD_DELAY_MS: String(timeoutMs + 500),
        ARGON2_THREADS: '2',
        ARGON2_TASK_TIMEOUT_MS: String(timeoutMs),
        SIGN_TASK_TIMEOUT_MS: String(timeoutMs),
        TRUST_PROXY: 'true',
        RATE_LIMIT_AUTH_FAIL_POINTS: '100000',
        RATE_LIMIT_TOKEN_POINTS: '100000',
      },
    });
    ({ platform, agent } = await new AdminClient(service).seed(['orders:read']));
  });

  afterAll(async () => {
    for (const hog of hogs) hog.kill('SIGKILL');
    await service?.dispose();
  });

  const token = (secret: string) =>
    postJson(`${service.publicUrl}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret, platform_id: platform.platform_id }, { 'x-forwarded-for': `198.51.100.${++address % 250}` });

  it('starts at the shortest allowed ARGON2_TASK_TIMEOUT_MS, and hung threads replaced again and again never end the process', async () => {
    const statuses: number[] = [];
    for (let round = 0; round < 4; round++) {
      // A hang on one thread while the other verifies wrong secrets; the hang is aborted at the deadline and
      // its thread replaced by one that again takes longer than the deadline to load.
      const answers = await Promise.all([token('fault:hang'), token('wrong-1'), token('wrong-2'), token(agent.secret)]);
      for (const answer of answers) {
        statuses.push(answer.status);
        if (answer.status === 503) expect(answer.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
      }
      expect(service.process.exitCode, service.output().slice(-2000)).toBeNull();
      expect(service.process.signalCode).toBeNull();
    }
    expect(statuses.filter((s) => ![200, 401, 503].includes(s)), statuses.join(',')).toEqual([]);
    expect(statuses.filter((s) => s === 503).length, 'each hang answered 503').toBeGreaterThanOrEqual(4);
    // Both threads back: argon2 answers again.
    await waitFor('argon2 to verify again', async () => (await token('wrong-after')).status === 401, 30_000, 200);
    // A hang that waited longer than its deadline for a replacement still loading got its 503 without a
    // thread (none stopped); the others each stopped one.
    expect(metricSum(await (await fetch(`${service.adminUrl}/metrics`)).text(), 'ace_worker_threads_replaced_total', { pool: 'argon2' })).toBeGreaterThanOrEqual(2);
    expect(serverErrorsIn(await (await fetch(`${service.adminUrl}/metrics`)).text())).toEqual([]);
    expect(service.process.exitCode).toBeNull();
  });
});
