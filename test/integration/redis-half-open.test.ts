// A half-open Redis: a proxy that keeps the connections (and accepts new ones) and lets no byte through.
// Before the breaker, every warm token waited out a Redis deadline or two (166/s -> 7/s, p50 ~1 s) for the
// whole fault, where a Redis that is down costs nothing. Now the connection is dropped once it stays silent
// past its deadline, the service goes around Redis as it does for a down one (in-process limits, Postgres
// reads, local invalidations) and says so (ace_redis_breaker_open, one log line each way, /readyz degraded),
// and it uses Redis again once a PING answers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { FaultProxy } from '../../kit/fault-proxy.js';
import { metricSum } from '../../kit/metrics.js';
import { sleep, waitFor } from '../../kit/wait.js';
import { startService } from '../support/service.js';
import { startRedisServer, type RedisServer } from '../support/faults.js';
import { proxied, Rig, summary, type Answer } from '../support/fault-matrix.js';
import type { Redis } from 'ioredis';

/** Concurrent token loops: enough that a window of a second or two holds hundreds of answers when healthy. */
const LOOPS = 8;
/** Each rate is measured over at least this long (and the baseline over this many answers): long enough to average out a busy machine's bursts. */
const WINDOW_MS = 3000;
const MIN_BASELINE = 150;

describe('Redis half-open (connections kept, no byte through)', () => {
  let redis: RedisServer;
  let proxy: FaultProxy;
  let rig: Rig;
  let direct: Redis;
  const prefix = `ace-half-open-${randomBytes(4).toString('hex')}:`;

  beforeAll(async () => {
    redis = await startRedisServer();
    direct = redis.client();
    proxy = await FaultProxy.start({ target: { port: redis.port } });
    // Default STORE_TIMEOUT_MS (Redis commands get 500 ms); limits high enough never to refuse the load.
    rig = new Rig(
      await startService({
        mode: 'real',
        redisKeyPrefix: prefix,
        env: { REDIS_URL: proxied(redis.url, proxy), RATE_LIMIT_TOKEN_POINTS: '1000000', RATE_LIMIT_AUTH_FAIL_POINTS: '100000', LOG_LEVEL: 'info' },
      }),
    );
    await rig.seed();
  });

  afterAll(async () => {
    direct?.disconnect();
    await rig?.service.dispose();
    await proxy?.close();
    await redis?.kill();
  });

  const metrics = async () => (await fetch(`${rig.service.adminUrl}/metrics`)).text();
  const breakerOpen = async () => metricSum(await metrics(), 'ace_redis_breaker_open', { connection: 'commands' });
  const readiness = async () => {
    const response = await fetch(`${rig.service.adminUrl}/readyz`);
    return { status: response.status, checks: ((await response.json()) as { checks: Record<string, unknown> }).checks };
  };
  /** The agent's per-key token counter in Redis (read past the proxy): it moves only while Redis is used. */
  const tokenCounter = async () => {
    const keys = await direct.keys(`${prefix}rl:token*{${rig.agent.api_key_id}}`);
    return keys.length === 0 ? 0 : Number((await direct.get(keys[0])) ?? 0);
  };
  const lines = (pattern: RegExp) => rig.service.output().split('\n').filter((line) => pattern.test(line));

  it('keeps warm tokens at >= half their rate within 2 s of the fault, no 500, no hang; Redis in use again once it answers', async () => {
    const answers: (Answer & { at: number })[] = [];
    let running = true;
    const loop = async () => {
      while (running) {
        const answer = await rig.token();
        answers.push({ ...answer, at: Date.now() });
      }
    };
    const rate = (from: number, to: number) => answers.filter((a) => a.at >= from && a.at < to && a.status === 200).length / ((to - from) / 1000);
    const load = Promise.all(Array.from({ length: LOOPS }, loop));
    try {
      // Before: Redis in use (the counter moves), a rate over a window holding enough answers.
      const counted = await tokenCounter();
      const baselineFrom = Date.now();
      await waitFor('a baseline window', () => Date.now() - baselineFrom >= WINDOW_MS && answers.filter((a) => a.at >= baselineFrom).length >= MIN_BASELINE, 30_000, 20);
      const baselineTo = Date.now();
      const before = rate(baselineFrom, baselineTo);
      expect(await tokenCounter()).toBeGreaterThan(counted);

      await proxy.set('blackhole');
      const faultAt = Date.now();
      // The rate from 2 s after the fault on, over as long a window as the baseline's.
      await waitFor('a window from 2 s after the fault', () => Date.now() - faultAt >= 2000 + (baselineTo - baselineFrom), 30_000, 20);
      const during = rate(faultAt + 2000, faultAt + 2000 + (baselineTo - baselineFrom));
      const halfSeconds = Array.from({ length: 12 }, (_, i) => rate(faultAt - 1000 + i * 500, faultAt - 500 + i * 500).toFixed(0)).join(' ');
      const label = `before ${before.toFixed(1)}/s, from 2 s into the fault ${during.toFixed(1)}/s (per half second from 1 s before: ${halfSeconds}); ${summary(answers)}`;
      expect(during, label).toBeGreaterThanOrEqual(0.5 * before);

      // Not silent: the breaker's gauge, one warning, and readiness degraded as for a Redis that is down.
      expect(await breakerOpen()).toBe(1);
      expect(metricSum(await metrics(), 'ace_store_up', { store: 'redis' })).toBe(0);
      const ready = await readiness();
      expect(ready.status).toBe(200);
      expect(ready.checks.redis).toBe(false);
      expect(ready.checks.degraded).toBe('redis');
      // The invalidation bus's subscribed connection is caught too (its heartbeat PING met the silence).
      await waitFor('the subscriber breaker to open', async () => metricSum(await metrics(), 'ace_redis_breaker_open', { connection: 'subscriber' }) === 1, 5000);

      await proxy.heal();
      const healedAt = Date.now();
      await waitFor('the breaker to close', async () => (await breakerOpen()) === 0, 15_000);
      // Redis is used again: the token counter in Redis moves with the load.
      const afterHeal = await tokenCounter();
      await waitFor('the token counter in Redis to move again', async () => (await tokenCounter()) > afterHeal, 15_000);
      await waitFor('readiness without degradation', async () => (await readiness()).checks.degraded === false, 15_000);
      expect(Date.now() - healedAt).toBeLessThan(15_000);
      await sleep(200); // a few answers after recovery
    } finally {
      running = false;
      await load;
    }
    expect(answers.filter((a) => a.status === 0), summary(answers)).toEqual([]); // no hang, no reset
    expect(answers.filter((a) => a.status !== 200 && !(a.status === 503 && /^[1-9]\d*$/.test(a.retryAfter ?? ''))), summary(answers)).toEqual([]);
    // One line each way per connection, however often the reconnects met the black hole.
    for (const connection of ['commands', 'subscriber']) {
      const of = (pattern: RegExp) => lines(pattern).filter((line) => line.includes(`"connection":"${connection}"`));
      expect(of(/Redis breaker open/), `${connection}: one warning on open`).toHaveLength(1);
      expect(of(/Redis breaker closed/), `${connection}: one line on close`).toHaveLength(1);
    }
    expect(metricSum(await metrics(), 'ace_redis_breaker_open')).toBe(0);
    expect(rig.service.output()).not.toMatch(/"status":500|internal_error|Unhandled|uncaught/i);
    expect(rig.service.process.exitCode).toBeNull();
  });
});
