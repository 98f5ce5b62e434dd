// Readiness means "can serve", and the service evaluates it on its own timer (ace_ready and ace_degraded
// follow an outage while nobody requests /readyz, so Prometheus sees it from /metrics alone). Postgres away
// with Redis answering: the instance still issues tokens to its warm agents, so it stays ready, degraded
// (ace_degraded{component="postgres"} 1, a log line saying what is down); only with Redis away too can it
// serve nothing, and it says not ready. The shared stores are never touched: fault proxies stand between.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { createDatabase, REDIS_URL, startService, type ServiceHandle, type TestDatabase } from '../support/service.js';
import { FaultProxy } from '../../kit/fault-proxy.js';
import { metricSum } from '../../kit/metrics.js';
import { sleep, waitFor } from '../../kit/wait.js';

describe('readiness without probe traffic', () => {
  let database: TestDatabase;
  let pgProxy: FaultProxy;
  let redisProxy: FaultProxy;
  let service: ServiceHandle;
  let platform: PlatformRecord;
  let agent: AgentCredentials;

  beforeAll(async () => {
    database = await createDatabase();
    pgProxy = await FaultProxy.start({ target: { port: Number(new URL(database.url).port) } });
    redisProxy = await FaultProxy.start({ target: { port: Number(new URL(REDIS_URL).port) } });
    const url = new URL(database.url);
    url.host = pgProxy.address;
    // startService waits for one /readyz 200; after that only the last test asks /readyz.
    service = await startService({
      mode: 'real',
      database: { ...database, url: url.toString() },
      env: { STORE_TIMEOUT_MS: '1000', REDIS_URL: `redis://${redisProxy.address}`, LOCAL_CACHE_TTL_MS: '300' },
    });
    const admin = new AdminClient(service);
    platform = await admin.createPlatform({ name: 'Shop', domain: 'shop.example', verification_status: 'verified', scopes: [{ name: 'orders:read' }] });
    agent = await admin.createAgent('warm');
    await admin.grant(agent.agent_id, platform.platform_id, ['orders:read']);
  });

  afterAll(async () => {
    await service?.dispose();
    await pgProxy?.close();
    await redisProxy?.close();
    await database?.drop();
  });

  const gauges = async () => {
    const text = await (await fetch(`${service.adminUrl}/metrics`)).text();
    return {
      ready: metricSum(text, 'ace_ready'),
      postgres: metricSum(text, 'ace_store_up', { store: 'postgres' }),
      degradedPostgres: metricSum(text, 'ace_degraded', { component: 'postgres' }),
      degradedRedis: metricSum(text, 'ace_degraded', { component: 'redis' }),
      readyzCalls: readyzCount(text),
    };
  };
  /** Requests the service counted on /readyz, whatever their status. */
  const readyzCount = (text: string) =>
    [...text.matchAll(/^ace_http_requests_total\{route="readyz",[^}]*\} (\S+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
  const token = () => postJson(`${service.publicUrl}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id });

  it('Postgres away, Redis up: still ready, ace_degraded{component="postgres"} 1 and a log line; Redis away too: not ready; both back: ready, not degraded', async () => {
    // Past the second Redis delete that follows an admin write (750 ms after the grant), then warm: the
    // secret is remembered and the agent's view cached in Redis.
    await sleep(1000);
    expect((await token()).status).toBe(200);
    const before = await gauges();
    expect(before).toMatchObject({ ready: 1, postgres: 1, degradedPostgres: 0, degradedRedis: 0 });

    await pgProxy.set('refuse');
    await waitFor('ace_store_up{store="postgres"} 0 and ace_degraded{component="postgres"} 1', async () => {
      const now = await gauges();
      return now.postgres === 0 && now.degradedPostgres === 1;
    });
    expect((await gauges()).ready).toBe(1);
    expect((await token()).status, 'the warm agent is served from the cache').toBe(200);
    // The log line travels through the process's stdout pipe: it may arrive after the gauges moved.
    await waitFor('the "degraded, still ready" log line', async () => /degraded, still ready: Postgres: no writable primary/.test(service.output()));

    await redisProxy.set('refuse');
    await waitFor('ace_ready 0 with both stores away', async () => (await gauges()).ready === 0);
    expect((await gauges()).degradedPostgres, 'not ready is not "degraded"').toBe(0);

    await Promise.all([pgProxy.heal(), redisProxy.heal()]);
    await waitFor('ace_ready 1 and nothing degraded', async () => {
      const now = await gauges();
      return now.ready === 1 && now.postgres === 1 && now.degradedPostgres === 0 && now.degradedRedis === 0;
    }, 20_000);
    // It names what came back last (the two may come back one readiness check apart).
    await waitFor('the "no longer degraded" log line', async () => /no longer degraded: (Postgres has a writable primary again|Redis answers again)/.test(service.output()));

    // Nobody asked /readyz in between: the gauges moved on the service's own timer.
    expect((await gauges()).readyzCalls).toBe(before.readyzCalls);
  });

  it('/readyz answers 200 with checks.degraded while Postgres is away and Redis answers', async () => {
    await pgProxy.set('refuse');
    try {
      await waitFor('/readyz to name postgres as degraded', async () => {
        const response = await fetch(`${service.adminUrl}/readyz`);
        const body = (await response.json()) as { status: string; checks: Record<string, unknown> };
        return response.status === 200 && body.status === 'ready' && body.checks.degraded === 'postgres' && body.checks.postgres === false;
      });
    } finally {
      await pgProxy.heal();
    }
  });
});
