// Redis killed and restarted under load: tokens keep coming (from Postgres), rate limits fall back to the
// in-process insurance limiter, and the service reconnects by itself when Redis is back. No 500s.
// The service talks to a private redis-server (the shared one on 6379 serves other suites in parallel).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { AdminClient, postJson, type AgentCredentials } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { dumpRedis, serverErrorsIn, startRedisServer, type RedisServer } from '../support/faults.js';
import { metricSum } from '../../kit/metrics.js';
import { sleep, waitFor } from '../../kit/wait.js';

const TOKEN_LIMIT = 150;
const FAIL_LIMIT = 5;
const LOAD_AGENTS = 16;

describe('Redis outage under load', () => {
  let redis: RedisServer;
  let service: ServiceHandle;
  let admin: AdminClient;
  const prefix = `ace-rel-redis-${randomBytes(4).toString('hex')}:`;

  beforeAll(async () => {
    redis = await startRedisServer();
    service = await startService({
      mode: 'real',
      redisKeyPrefix: prefix,
      env: {
        REDIS_URL: redis.url,
        TRUST_PROXY: 'true',
        RATE_LIMIT_TOKEN_POINTS: String(TOKEN_LIMIT),
        RATE_LIMIT_AUTH_FAIL_POINTS: String(FAIL_LIMIT),
        // A short in-process cache, so agent views are re-read from the shared layer (Redis, or
        // Postgres while Redis is away) during the test rather than served from memory throughout.
        LOCAL_CACHE_TTL_MS: '200',
      },
    });
    admin = new AdminClient(service);
  });

  afterAll(async () => {
    await service?.dispose();
    await redis?.kill();
  });

  const token = (agent: AgentCredentials, platformId: string, secret = agent.secret, address = '203.0.113.1') =>
    postJson(`${service.publicUrl}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret, platform_id: platformId }, { 'x-forwarded-for': address });
  const metrics = async () => (await fetch(`${service.adminUrl}/metrics`)).text();
  const readiness = async () => {
    const response = await fetch(`${service.adminUrl}/readyz`);
    return { status: response.status, body: (await response.json()) as { checks: Record<string, unknown> } };
  };

  it('keeps issuing tokens without 5xx through a Redis kill and restart, limits in process meanwhile, and reconnects', async () => {
    const platform = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'orders:read' }] });
    const newAgent = async (name: string) => {
      const agent = await admin.createAgent(name);
      await admin.grant(agent.agent_id, platform.platform_id, ['orders:read']);
      return agent;
    };
    const agents = await Promise.all(Array.from({ length: LOAD_AGENTS }, (_, i) => newAgent(`load-${i}`)));
    // Writes delete the Redis entry twice (the second time 750 ms later): warm up after that.
    await sleep(1000);
    for (const agent of agents) expect((await token(agent, platform.platform_id)).status).toBe(200);

    // Redis is in use: cached agent views and rate-limit counters live there.
    const probe = redis.client();
    const before = await dumpRedis(probe, prefix);
    expect([...before.keys()].some((k) => k.includes(`c:agent:${agents[0].api_key_id}`))).toBe(true);
    // rate-limiter-flexible joins its prefix and the key with ':', and the key is hash-tagged, hence `rl:token::{<id>}`.
    expect([...before.keys()].some((k) => /rl:token:+/.test(k) && k.endsWith(`{${agents[0].api_key_id}}`))).toBe(true);
    probe.disconnect();

    // Steady load: 4 clients, round-robin over the agents, paced so no agent nears its limit.
    const statuses: { phase: string; status: number }[] = [];
    let phase = 'redis up';
    let running = true;
    let next = 0;
    const client = async () => {
      while (running) {
        const agent = agents[next++ % agents.length];
        const response = await token(agent, platform.platform_id);
        statuses.push({ phase, status: response.status });
        await sleep(40);
      }
    };
    const load = Promise.all([client(), client(), client(), client()]);
    await sleep(1000);

    phase = 'redis down';
    await redis.kill();
    await waitFor('ace_store_up{store="redis"} 0', async () => metricSum(await metrics(), 'ace_store_up', { store: 'redis' }) === 0, 5000);

    // Readiness does not depend on Redis (an accelerator): the pod stays in the load balancer.
    const duringOutage = await readiness();
    expect(duringOutage.status).toBe(200);
    expect(duringOutage.body.checks.redis).toBe(false);

    // A brand-new agent (never cached anywhere) gets a token: verified and looked up in Postgres.
    const fresh = await newAgent('created-during-outage');
    expect((await token(fresh, platform.platform_id)).status).toBe(200);

    // Per-key limit, now in process: the limit still holds.
    const limited = await newAgent('limited');
    const limitedStatuses: number[] = [];
    for (let i = 0; i < TOKEN_LIMIT + 1; i++) limitedStatuses.push((await token(limited, platform.platform_id)).status);
    expect(limitedStatuses.slice(0, TOKEN_LIMIT).every((s) => s === 200)).toBe(true);
    const refused = await token(limited, platform.platform_id);
    expect(refused.status).toBe(429);
    expect(refused.body.error_code).toBe('rate_limited');
    expect(refused.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);

    // Per-address failure limit, in process too.
    const failStatuses: number[] = [];
    for (let i = 0; i < FAIL_LIMIT + 2; i++) {
      failStatuses.push((await token(fresh, platform.platform_id, `wrong-${i}`, '192.0.2.77')).status);
    }
    expect(failStatuses.slice(0, FAIL_LIMIT)).toEqual(Array(FAIL_LIMIT).fill(401));
    expect(failStatuses.at(-1)).toBe(429);

    await sleep(500);
    phase = 'redis back';
    await redis.start();
    const reconnectMs = await waitFor(
      'the service to reconnect to Redis',
      async () => metricSum(await metrics(), 'ace_store_up', { store: 'redis' }) === 1 && (await readiness()).body.checks.redis === true,
      15_000,
    );
    expect(reconnectMs).toBeLessThan(15_000);
    await sleep(1000);
    running = false;
    await load;

    // Redis is used again after the restart (it came back empty): a new agent's view and counter land there.
    const after = await newAgent('after-restart');
    expect((await token(after, platform.platform_id)).status).toBe(200);
    const probeAfter = redis.client();
    await waitFor('the agent view to be cached in Redis again', async () => {
      const keys = [...(await dumpRedis(probeAfter, prefix)).keys()];
      return keys.some((k) => k.endsWith(`c:agent:${after.api_key_id}`)) && keys.some((k) => /rl:token:+/.test(k) && k.endsWith(`{${after.api_key_id}}`));
    }, 5000);
    probeAfter.disconnect();

    // The load saw only 200s, in every phase, and enough of them to mean something.
    const byPhase = (p: string) => statuses.filter((s) => s.phase === p);
    for (const p of ['redis up', 'redis down', 'redis back']) {
      expect(byPhase(p).length, `requests during "${p}"`).toBeGreaterThan(5);
      expect(byPhase(p).filter((s) => s.status !== 200), `non-200 during "${p}"`).toEqual([]);
    }
    expect(serverErrorsIn(await metrics())).toEqual([]);
    expect(service.process.exitCode).toBeNull();
  });
});
