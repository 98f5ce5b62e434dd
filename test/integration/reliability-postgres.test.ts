// Postgres unreachable (connections refused) or hanging (a black hole): what the caches can answer still
// succeeds, everything else is a prompt 503 with Retry-After, /readyz stays 200 and names Postgres as
// degraded (Redis still serves the warm agents), and the service recovers by itself. The shared Postgres is never touched: a TCP proxy in this process stands between.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { AdminClient, postJson, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { createDatabase, startService, type ServiceHandle, type TestDatabase } from '../support/service.js';
import { contractErrorProblem, serverErrorsIn, TcpProxy } from '../support/faults.js';
import { metricSum } from '../../kit/metrics.js';
import { sleep, waitFor } from '../../kit/wait.js';

const STORE_TIMEOUT_MS = 1000;
/** Any answer that depends on Postgres must come within this (store deadline plus generous slack). */
const BOUND_MS = STORE_TIMEOUT_MS + 2000;

describe('Postgres outage', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let service: ServiceHandle;
  let admin: AdminClient;
  let platform: PlatformRecord;
  let warm: AgentCredentials;
  let address = 0;

  beforeAll(async () => {
    database = await createDatabase();
    proxy = new TcpProxy(5432);
    const port = await proxy.listen();
    const url = new URL(database.url);
    url.port = String(port);
    // Migrations run at start, through the proxy, before any fault is injected.
    service = await startService({
      mode: 'real',
      database: { ...database, url: url.toString() },
      env: {
        TRUST_PROXY: 'true',
        STORE_TIMEOUT_MS: String(STORE_TIMEOUT_MS),
        RATE_LIMIT_AUTH_FAIL_POINTS: '100000',
        // Short in-process cache: during the outage, cached answers come from Redis, not only from memory.
        LOCAL_CACHE_TTL_MS: '300',
      },
    });
    admin = new AdminClient(service);
    platform = await admin.createPlatform({
      name: 'Shop',
      domain: 'shop.example',
      verification_status: 'verified',
      scopes: [{ name: 'orders:read' }],
      routes: [{ method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] }],
    });
    warm = await admin.createAgent('warm');
    await admin.grant(warm.agent_id, platform.platform_id, ['orders:read']);
  });

  afterAll(async () => {
    await service?.dispose();
    await proxy?.close();
    await database?.drop();
  });

  const timed = async <T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> => {
    const started = performance.now();
    const value = await fn();
    return { ms: performance.now() - started, value };
  };
  const token = (agent: { api_key_id: string }, secret: string) =>
    postJson(
      `${service.publicUrl}/api/v1/auth/token`,
      { api_key_id: agent.api_key_id, secret, platform_id: platform.platform_id },
      { 'x-forwarded-for': `198.51.100.${++address % 250}` },
    );
  const listing = (agent: AgentCredentials) =>
    postJson(`${service.publicUrl}/api/v1/auth/agents/me/platforms`, { api_key_id: agent.api_key_id, secret: agent.secret });
  const readyz = async () => {
    const response = await fetch(`${service.adminUrl}/readyz`);
    return { status: response.status, retryAfter: response.headers.get('retry-after'), body: (await response.json()) as { status: string; checks: Record<string, unknown> } };
  };
  const expect503 = (response: { status: number; headers: Headers; text: string }, what: string) => {
    expect(response.status, what).toBe(503);
    expect(contractErrorProblem(503, response.headers.get('content-type') ?? undefined, response.text), what).toBeNull();
    expect(JSON.parse(response.text).error_code).toBe('service_unavailable');
    expect(response.headers.get('retry-after'), what).toMatch(/^[1-9]\d*$/);
  };

  /** Everything a cache can answer; run while Postgres is away. */
  const cachedAnswersStillWork = async () => {
    await sleep(400); // past LOCAL_CACHE_TTL_MS: the Redis layer answers
    for (let i = 0; i < 3; i++) {
      const issued = await timed(() => token(warm, warm.secret));
      expect(issued.value.status, 'warm token').toBe(200);
      expect(issued.ms).toBeLessThan(BOUND_MS);
    }
    const listed = await listing(warm);
    expect(listed.status).toBe(200);
    expect(listed.body.platforms).toEqual([
      expect.objectContaining({ platform_id: platform.platform_id, granted_scopes: ['orders:read'], status: 'active' }),
    ]);
    const scopeFile = await fetch(`${service.publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`);
    expect(scopeFile.status).toBe(200);
    expect(await scopeFile.text()).toContain(platform.platform_id);
    const jwks = await fetch(`${service.publicUrl}/.well-known/jwks.json`);
    expect(jwks.status).toBe(200);
    expect(((await jwks.json()) as { keys: unknown[] }).keys.length).toBeGreaterThan(0);
    expect((await fetch(`${service.adminUrl}/healthz`)).status).toBe(200);
  };

  /** Everything that needs Postgres: a bounded 503 with Retry-After, never a hang or a 500. */
  const uncachedAnswersAre503 = async (cold: AgentCredentials) => {
    const checks: [string, () => Promise<{ status: number; headers: Headers; text: string }>][] = [
      ['cold credentials', () => token(cold, cold.secret)],
      ['wrong secret of a warm agent', () => token(warm, 'not-the-secret')],
      ['unknown api_key_id', () => token({ api_key_id: `agnt_kid_${randomBytes(16).toString('hex')}` }, 'whatever')],
      ['uncached scope file', () => fetchText(`${service.publicUrl}/api/v1/platforms/${crypto.randomUUID()}/scopes.yaml`)],
      ['admin read', () => fetchText(`${service.adminUrl}/admin/v1/agents`, { headers: { authorization: `Bearer ${service.adminToken}` } })],
      [
        'admin write',
        () =>
          fetchText(`${service.adminUrl}/admin/v1/agents`, {
            method: 'POST',
            headers: { authorization: `Bearer ${service.adminToken}`, 'content-type': 'application/json' },
            body: JSON.stringify({ name: 'during-outage' }),
          }),
      ],
    ];
    for (const [what, call] of checks) {
      const { ms, value } = await timed(call);
      expect503(value, what);
      expect(ms, `${what} answered in ${Math.round(ms)} ms`).toBeLessThan(BOUND_MS);
    }
    // Still serving its warm agents from the caches: ready, degraded.
    const ready = await timed(readyz);
    expect(ready.value.status).toBe(200);
    expect(ready.value.body).toMatchObject({ status: 'ready', checks: { postgres: false, degraded: 'postgres' } });
    expect(ready.ms).toBeLessThan(BOUND_MS);
    expect(metricSum(await (await fetch(`${service.adminUrl}/metrics`)).text(), 'ace_store_up', { store: 'postgres' })).toBe(0);
  };

  /** After Postgres returns: ready again without a restart, and uncached requests succeed. */
  const recovers = async (cold: AgentCredentials) => {
    await waitFor('/readyz to be 200 and no longer degraded', async () => {
      const ready = await readyz();
      return ready.status === 200 && ready.body.checks.degraded === false;
    }, 20_000, 200);
    expect((await token(cold, cold.secret)).status).toBe(200);
    expect((await token(warm, 'not-the-secret')).status).toBe(401);
    const created = await admin.createAgent('after-outage');
    expect(created.secret).toBeTruthy();
    expect(service.process.exitCode).toBeNull();
    expect(serverErrorsIn(await (await fetch(`${service.adminUrl}/metrics`)).text())).toEqual([]);
  };

  const warmUp = async () => {
    await sleep(1000); // past the delayed second Redis delete that follows admin writes
    expect((await token(warm, warm.secret)).status).toBe(200);
    expect((await listing(warm)).status).toBe(200);
    expect((await fetch(`${service.publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`)).status).toBe(200);
  };

  it('refused connections: cached answers succeed, the rest is 503 + Retry-After, then recovers by itself', async () => {
    const cold = await admin.createAgent('cold-1');
    await admin.grant(cold.agent_id, platform.platform_id, ['orders:read']);
    await warmUp();

    proxy.refuse();
    try {
      await cachedAnswersStillWork();
      await uncachedAnswersAre503(cold);
    } finally {
      proxy.forward();
    }
    await recovers(cold);
  });

  it('black-holed connections: the store deadline bounds every answer, then recovers by itself', async () => {
    const cold = await admin.createAgent('cold-2');
    await admin.grant(cold.agent_id, platform.platform_id, ['orders:read']);
    await warmUp();

    proxy.blackhole();
    try {
      await cachedAnswersStillWork();
      await uncachedAnswersAre503(cold);
      // Several at once: a stuck pool must not turn into a queue of hung requests.
      const many = await timed(() => Promise.all(Array.from({ length: 12 }, () => token(cold, cold.secret))));
      for (const response of many.value) expect503(response, 'concurrent cold credentials');
      expect(many.ms).toBeLessThan(BOUND_MS * 2);
    } finally {
      proxy.forward();
    }
    await recovers(cold);
  });

  it('black hole: the listing answers at once without the enrichment it cannot get in time', async () => {
    const uncached = await admin.createPlatform({
      name: 'Uncached',
      domain: 'uncached.example',
      verification_status: 'verified',
      scopes: [{ name: 'x' }],
    });
    const agent = await admin.createAgent('enrichment');
    await admin.grant(agent.agent_id, platform.platform_id, ['orders:read']);
    await admin.grant(agent.agent_id, uncached.platform_id, ['x']);
    // The grant read (and cached) the platform; a change evicts it everywhere.
    await admin.patchPlatform(uncached.platform_id, { name: 'Uncached' });
    await sleep(1000); // past the delayed second Redis delete that follows admin writes
    // Warm the agent (verified secret, cached view) and the first platform's metadata; `uncached` stays uncached.
    expect((await token(agent, agent.secret)).status).toBe(200);
    expect((await fetch(`${service.publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`)).status).toBe(200);

    proxy.blackhole();
    try {
      await sleep(400); // past LOCAL_CACHE_TTL_MS: the view and the first platform come from Redis
      const { ms, value } = await timed(() => listing(agent));
      expect(value.status).toBe(200);
      const byId = Object.fromEntries(value.body.platforms.map((p: { platform_id: string }) => [p.platform_id, p]));
      // Required fields always; enrichment only where it arrived within ENRICHMENT_TIMEOUT_MS (100 ms).
      expect(byId[uncached.platform_id]).toEqual({ platform_id: uncached.platform_id, granted_scopes: ['x'], status: 'active', hostname: null });
      expect(byId[platform.platform_id]).toMatchObject({ name: 'Shop', hostname: 'shop.example', verification_status: 'verified' });
      expect(ms).toBeLessThan(STORE_TIMEOUT_MS); // not waiting for the store deadline
    } finally {
      proxy.forward();
    }
  });
});

async function fetchText(url: string, init?: RequestInit) {
  const response = await fetch(url, init);
  return { status: response.status, headers: response.headers, text: await response.text() };
}
