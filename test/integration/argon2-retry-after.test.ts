// A burst of cold credentials far larger than the argon2 queue (a fleet restarting at once): the refused
// callers are told to come back spread over the coming seconds at about the pool's rate, not all after
// 1 second (which would bring the whole burst back together, every second).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { AdminClient, postJson } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';

const BURST = 400;

describe('Retry-After of a shed argon2 burst', () => {
  let service: ServiceHandle;
  let admin: AdminClient;

  beforeAll(async () => {
    service = await startService({
      mode: 'real',
      env: {
        ARGON2_THREADS: '1',
        ARGON2_MAX_QUEUE: '4',
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

  it('books refused callers into the coming seconds instead of answering 1 s to all', async () => {
    const { platform } = await admin.seed(['orders:read']);
    const url = `${service.publicUrl}/api/v1/auth/token`;
    // A quiet pool first: a few cold logins at ~2.5 per second, far below what one thread verifies.
    for (let i = 0; i < 6; i++) {
      const body = { api_key_id: `agnt_kid_${randomBytes(16).toString('hex')}`, secret: 'guess', platform_id: platform.platform_id };
      expect((await postJson(url, body, { 'x-forwarded-for': `10.8.0.${i}` })).status).toBe(401);
      await new Promise((resolve) => setTimeout(resolve, 400));
    }
    const answers = await Promise.all(
      Array.from({ length: BURST }, async (_, i) => {
        const body = { api_key_id: `agnt_kid_${randomBytes(16).toString('hex')}`, secret: 'guess', platform_id: platform.platform_id };
        const response = await postJson(url, body, { 'x-forwarded-for': `10.9.${i >> 8}.${i & 255}` });
        return { status: response.status, retryAfter: response.headers.get('retry-after') };
      }),
    );
    const shed = answers.filter((a) => a.status === 503);
    expect(shed.length).toBeGreaterThan(BURST / 2);
    const waits = shed.map((a) => Number(a.retryAfter));
    for (const a of shed) expect(a.retryAfter).toMatch(/^[1-9]\d*$/);
    // One argon2 thread verifies a few dozen per second: far fewer than the burst are told "1".
    const inOneSecond = waits.filter((w) => w === 1).length;
    expect(inOneSecond).toBeLessThan(shed.length / 2);
    expect(new Set(waits).size).toBeGreaterThanOrEqual(3);
    // Never beyond the agent client's default patience (60 s).
    expect(Math.max(...waits)).toBeLessThanOrEqual(60);
    // Booked at what the pool can verify, not at what it did in the last second: counting completions made
    // the quiet logins above a rate of ~3 per second, which spread the burst over the whole minute (median
    // ~50 s; a 2,000-agent fleet took 42 s instead of 14 that way). At the pool's rate (tens per second)
    // the burst fits in a few seconds.
    const median = [...waits].sort((a, b) => a - b)[Math.floor(waits.length / 2)];
    expect(median).toBeLessThanOrEqual(20);
    expect(waits.filter((w) => w === 60).length).toBeLessThan(shed.length / 2);
  });
});
