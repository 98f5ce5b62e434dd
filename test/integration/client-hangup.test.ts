// A client that hangs up while its credential check runs or waits must cost the service nothing more:
// the running argon2 task finishes on its thread (Piscina would stop the whole thread if the task were
// aborted, and start a new one: a cheap way to burn CPU, and what a fleet's timeouts did under load), and
// a check still waiting in line leaves it at once, never reaching a thread and giving back the address's
// share of the queue. The test-only worker's secret "fault:slow" holds the only argon2 thread for four seconds.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson, type PlatformRecord } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { metricSum } from '../../kit/metrics.js';
import { waitFor } from '../../kit/wait.js';

const SLOW_ADDRESS = '203.0.113.77';
const WAITING_ADDRESS = '203.0.113.78';

describe('clients that hang up during their credential check', () => {
  let service: ServiceHandle;
  let admin: AdminClient;
  let platform: PlatformRecord;

  beforeAll(async () => {
    service = await startService({
      mode: 'real',
      faultWorker: true,
      env: {
        ARGON2_THREADS: '1',
        ARGON2_TASK_TIMEOUT_MS: '10000', // the slow task is not a hung one
        ARGON2_MAX_PER_ADDRESS: '1', // one check in line or running per address: a second one gets 429
        TRUST_PROXY: 'true',
        RATE_LIMIT_AUTH_FAIL_POINTS: '100000',
      },
    });
    admin = new AdminClient(service);
    ({ platform } = await admin.seed(['orders:read']));
  });

  afterAll(async () => {
    await service?.dispose();
  });

  const metrics = async () => (await fetch(`${service.adminUrl}/metrics`)).text();
  const body = (secret: string) => JSON.stringify({ api_key_id: 'agnt_kid_00000000000000000000000000000000', secret, platform_id: platform.platform_id });

  /** A token request on its own socket, which the test closes without reading the answer. */
  const sendAndKeepOpen = async (secret: string, address: string) => {
    const url = new URL(service.publicUrl);
    const socket = net.connect(Number(url.port), url.hostname);
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.on('error', () => {});
    const payload = body(secret);
    socket.write(
      `POST /api/v1/auth/token HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\n` +
        `X-Forwarded-For: ${address}\r\nContent-Length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
    );
    return socket;
  };

  it('the running check finishes on the same thread; the waiting one never runs and frees its share', async () => {
    const url = `${service.publicUrl}/api/v1/auth/token`;
    const check = (address: string) => postJson(url, JSON.parse(body('another-wrong-secret')), { 'x-forwarded-for': address });
    const before = await metrics();
    const checksBefore = metricSum(before, 'ace_credential_checks_total');
    expect(metricSum(before, 'ace_worker_threads_replaced_total', { pool: 'argon2' })).toBe(0);

    // The slow check holds its address's only place from the moment it enters the line, and the line is
    // empty, so it runs at once: a 429 for its address says it is running. A probe can overtake it on a
    // busy machine (the two travel on different sockets): the probe then runs a check of its own (counted
    // below), and the slow request, finding the place taken, is answered 429 on its socket; it is sent again.
    let running = await sendAndKeepOpen('fault:slow', SLOW_ADDRESS);
    let runningAnswered = false;
    const watchRunning = () => running.once('data', () => (runningAnswered = true));
    watchRunning();
    let earlyProbes = 0;
    await waitFor('the slow check to run', async () => {
      const probe = await check(SLOW_ADDRESS);
      if (probe.status === 401) earlyProbes++;
      if (runningAnswered) {
        running.destroy();
        runningAnswered = false;
        running = await sendAndKeepOpen('fault:slow', SLOW_ADDRESS);
        watchRunning();
        return false;
      }
      return probe.status === 429;
    }, 15_000, 20);
    const waiting = await sendAndKeepOpen('a-wrong-secret', WAITING_ADDRESS);
    await waitFor('the second check to wait in line', async () => metricSum(await metrics(), 'ace_worker_queue_depth', { pool: 'argon2' }) === 1, 5000, 20);

    running.destroy();
    waiting.destroy();
    await waitFor('the waiting check to leave the line', async () => metricSum(await metrics(), 'ace_worker_queue_depth', { pool: 'argon2' }) === 0, 5000, 20);
    // Its address's place came back at once, while the slow check still runs: a check from it is let in
    // (it waits for the thread and answers 401), not refused with 429.
    expect((await check(WAITING_ADDRESS)).status).toBe(401);
    await waitFor('the slow check to finish', async () => metricSum(await metrics(), 'ace_credential_checks_total') >= checksBefore + earlyProbes + 2, 20_000, 50);
    expect((await check(SLOW_ADDRESS)).status).toBe(401); // its place is back once it ended

    const after = await metrics();
    // The slow check, the early probes and the two checks above: the abandoned waiting one never ran.
    expect(metricSum(after, 'ace_credential_checks_total')).toBe(checksBefore + earlyProbes + 3);
    // Nobody stopped the thread: the slow task ran to its end.
    expect(metricSum(after, 'ace_worker_threads_replaced_total', { pool: 'argon2' })).toBe(0);
  });
});
