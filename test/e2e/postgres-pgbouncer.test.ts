// The service behind PgBouncer 1.18 in transaction mode with PgBouncer's default settings (no
// prepared-statement support), two instances sharing it: the contract's key flows and admin writes under
// concurrency all succeed. The driver's default (named prepared statements) failed here with 500
// `prepared statement "…" does not exist` whenever a write landed on another server connection.
import { randomBytes } from 'node:crypto';
import { waitFor } from '../../kit/wait.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { startPgBouncer, startPostgres, stopAll, type PgBouncerNode, type PostgresNode } from '../../kit/topology/index.js';

describe('through PgBouncer (transaction mode, default settings)', () => {
  let pg: PostgresNode;
  let bouncer: PgBouncerNode;
  const services: ServiceHandle[] = [];
  let a: AdminClient;
  let b: AdminClient;
  let platform: PlatformRecord;

  beforeAll(async () => {
    pg = await startPostgres();
    bouncer = await startPgBouncer({ upstream: pg });
    const database = { name: 'postgres', url: bouncer.url('postgres'), drop: async () => {} };
    const redisKeyPrefix = `ace-pgb-${randomBytes(4).toString('hex')}:`;
    // One at a time: the second also runs the migrations (a no-op under the migration lock).
    // What is tested is correctness through the pooler, not latency: the store bound is widened so that 24
    // concurrent writes on a loaded 2-core machine are not cut by the 2 s default (a 503 by design there).
    for (let i = 0; i < 2; i++) services.push(await startService({ mode: 'real', database, redisKeyPrefix, env: { RATE_LIMIT_AUTH_FAIL_POINTS: '100000', RATE_LIMIT_TOKEN_POINTS: '100000', ARGON2_MAX_PER_ADDRESS: '64', STORE_TIMEOUT_MS: '15000' } }));
    [a, b] = services.map((s) => new AdminClient(s));
    platform = await a.createPlatform({
      name: 'Shop',
      domain: 'shop.example',
      verification_status: 'verified',
      scopes: [{ name: 'orders:read' }, { name: 'orders:write' }],
      routes: [{ method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] }],
    });
  }, 90_000);

  afterAll(async () => {
    await Promise.all(services.map((s) => s.dispose()));
    await stopAll();
  });

  const token = (service: ServiceHandle, agent: { api_key_id: string; secret: string }, scope?: string) =>
    postJson(`${service.publicUrl}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id, ...(scope ? { scope } : {}) });

  it('admin writes from both instances at once all succeed, and each instance sees the other\'s changes', async () => {
    const statuses: number[] = [];
    const record = async <T extends { status: number }>(p: Promise<T>): Promise<T> => {
      const r = await p;
      statuses.push(r.status);
      return r;
    };
    // 24 agents created, granted and renamed concurrently, half through each instance.
    const agents = await Promise.all(
      Array.from({ length: 24 }, async (_, i) => {
        const [mine, other] = i % 2 === 0 ? [a, b] : [b, a];
        const created = await record(mine.request<AgentCredentials>('POST', '/admin/v1/agents', { name: `agent-${i}` }));
        const agent = created.body;
        if (created.status !== 201) return agent;
        await record(other.request('PUT', `/admin/v1/agents/${agent.agent_id}/grants/${platform.platform_id}`, { scopes: ['orders:read', 'orders:write'] }));
        await record(mine.request('PATCH', `/admin/v1/agents/${agent.agent_id}`, { name: `agent-${i}-renamed` }));
        return agent;
      }),
    );
    // Platform updates in the middle of it all (each one a transaction with a row lock).
    await Promise.all(Array.from({ length: 6 }, (_, i) => record((i % 2 ? a : b).request('PATCH', `/admin/v1/platforms/${platform.platform_id}`, { name: `Shop ${i}` }))));
    expect(statuses.filter((s) => s >= 300), `statuses: ${statuses.join(',')}\n${services.map((s) => s.output().split('\n').filter((l) => /"level":(40|50)/.test(l)).join('\n')).join('\n')}`).toEqual([]);

    // Tokens from both instances for every agent.
    const tokens = await Promise.all(agents.flatMap((agent) => services.map((s) => token(s, agent, 'orders:read'))));
    expect(tokens.map((t) => t.status).filter((s) => s !== 200)).toEqual([]);

    // Deactivation through one instance is refused at the other; grant removal likewise.
    const [x, y] = agents;
    await a.patchAgent(x.agent_id, { status: 'inactive' });
    expect((await token(services[1], x)).status).toBe(403);
    await b.revoke(y.agent_id, platform.platform_id);
    expect((await token(services[0], y)).status).toBe(403);
    // Both are in Postgres (not only in a cache).
    const [row] = await pg.query<{ status: string; grants: number }>(
      `SELECT a.status, (SELECT count(*)::int FROM grants g WHERE g.agent_id = a.id) AS grants FROM agents a WHERE a.id = '${x.agent_id}'`,
    );
    expect(row).toEqual({ status: 'inactive', grants: 1 });
    expect(await pg.query(`SELECT 1 FROM grants WHERE agent_id = '${y.agent_id}'`)).toEqual([]);

    // Secret rotation and key rotation (advisory lock inside one transaction) go through the pooler too.
    const rotated = await b.rotateSecret(agents[2].agent_id);
    expect((await token(services[0], { api_key_id: agents[2].api_key_id, secret: rotated.secret })).status).toBe(200);
    const key = await a.rotateKey();
    // The other instance learns of the new key by the bus (at once) or its key poll (each second): a condition.
    await waitFor('the other instance lists the new key', async () => (await b.listKeys()).keys.some((k) => k.kid === key.kid), 5000);

    // The audit trail (its own pool) wrote through the pooler as well.
    const [{ n }] = await pg.query<{ n: number }>("SELECT count(*)::int AS n FROM audit_events WHERE type = 'token.issued'");
    expect(n).toBeGreaterThanOrEqual(tokens.length);

    for (const s of services) {
      expect(s.output()).not.toMatch(/prepared statement|"status":500|internal_error/);
      const readyz = (await (await fetch(`${s.adminUrl}/readyz`)).json()) as { checks: Record<string, unknown> };
      // Through a pooler the probe names the server behind it.
      expect(readyz.checks).toMatchObject({ postgres: true, postgres_primary: `127.0.0.1:${pg.port}` });
    }
  }, 90_000);
});
