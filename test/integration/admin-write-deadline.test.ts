// Admin writes under a stalled store: a write answered 503 was not applied (the statement is cancelled at
// the deadline and its transaction rolled back), so the token endpoint and Postgres agree afterwards; and
// key rotate/retire answer a prompt 503 with Retry-After on a black-holed connection instead of hanging.
// The agent's row is locked from another session, as a long transaction or a migration would.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import postgres from 'postgres';
import { AdminClient, postJson, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { createDatabase, startService, type ServiceHandle, type TestDatabase } from '../support/service.js';
import { contractErrorProblem, serverErrorsIn, TcpProxy } from '../support/faults.js';
import { waitFor } from '../../kit/wait.js';

const STORE_TIMEOUT_MS = 1000;
/** A store-bound answer comes within the deadline plus generous slack (2 shared cores). */
const BOUND_MS = STORE_TIMEOUT_MS + 4000;

describe('admin writes past the store deadline', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let service: ServiceHandle;
  let admin: AdminClient;
  let platform: PlatformRecord;
  let direct: postgres.Sql;
  let address = 0;

  beforeAll(async () => {
    database = await createDatabase();
    proxy = new TcpProxy(5432);
    const url = new URL(database.url);
    url.port = String(await proxy.listen());
    service = await startService({
      mode: 'real',
      database: { ...database, url: url.toString() },
      env: {
        TRUST_PROXY: 'true',
        STORE_TIMEOUT_MS: String(STORE_TIMEOUT_MS),
        RATE_LIMIT_AUTH_FAIL_POINTS: '100000',
        KEY_PROPAGATION_SECONDS: '3600', // a rotated key stays "next", so it may be retired
      },
    });
    admin = new AdminClient(service);
    platform = await admin.createPlatform({ name: 'Shop', domain: 'shop.example', scopes: [{ name: 'orders:read' }] });
    // The other session: straight to Postgres, never through the proxy.
    direct = postgres(database.url, { max: 4, onnotice: () => {} });
  });

  afterAll(async () => {
    await direct?.end();
    await service?.dispose();
    await proxy?.close();
    await database?.drop();
  });

  const token = (agent: { api_key_id: string }, secret: string) =>
    postJson(
      `${service.publicUrl}/api/v1/auth/token`,
      { api_key_id: agent.api_key_id, secret, platform_id: platform.platform_id },
      { 'x-forwarded-for': `198.51.100.${++address % 250}` },
    );
  const adminCall = async (method: string, route: string, body?: unknown) => {
    const started = performance.now();
    const response = await fetch(`${service.adminUrl}${route}`, {
      method,
      headers: { authorization: `Bearer ${service.adminToken}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, headers: response.headers, text: await response.text(), ms: performance.now() - started };
  };
  const expect503 = (response: { status: number; headers: Headers; text: string; ms: number }, what: string) => {
    expect(response.status, `${what}: ${response.text}`).toBe(503);
    expect(contractErrorProblem(503, response.headers.get('content-type') ?? undefined, response.text), what).toBeNull();
    expect(response.headers.get('retry-after'), what).toMatch(/^[1-9]\d*$/);
    expect(response.ms, `${what} answered in ${Math.round(response.ms)} ms`).toBeLessThan(BOUND_MS);
  };

  /** Holds the agent's row (SELECT … FOR UPDATE) in another session while `during` runs, then releases it. */
  const withRowLocked = async (agentId: string, during: () => Promise<void>) => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    const holder = direct.begin(async (tx) => {
      await tx`SELECT id FROM agents WHERE id = ${agentId} FOR UPDATE`;
      locked();
      await released;
    });
    await isLocked;
    try {
      await during();
    } finally {
      release();
      await holder;
    }
  };

  /**
   * A later write to the same row, answered 200: any statement still queued on the row lock (the old
   * behaviour) has committed by then, so reading the row afterwards shows whether the 503 was applied.
   */
  const settleRow = async (agentId: string) => {
    await admin.patchAgent(agentId, { name: 'settled' });
    const [row] = await direct`SELECT status, secret_hash FROM agents WHERE id = ${agentId}`;
    return row as { status: string; secret_hash: string };
  };

  const warmAgent = async (name: string): Promise<AgentCredentials> => {
    const agent = await admin.createAgent(name);
    await admin.grant(agent.agent_id, platform.platform_id, ['orders:read']);
    // Warm: cached view (Redis and in-process) and a remembered verified secret.
    await waitFor('a token for the new agent', async () => (await token(agent, agent.secret)).status === 200);
    expect((await token(agent, agent.secret)).status).toBe(200);
    return agent;
  };

  it('PATCH status inactive on a locked row: 503, and after the lock goes the agent is still active everywhere', async () => {
    const agent = await warmAgent('locked-status');
    await withRowLocked(agent.agent_id, async () => {
      expect503(await adminCall('PATCH', `/admin/v1/agents/${agent.agent_id}`, { status: 'inactive' }), 'PATCH status');
    });
    const row = await settleRow(agent.agent_id);
    expect(row.status, 'the 503 write must not have been applied').toBe('active');
    expect((await admin.request('GET', `/admin/v1/agents/${agent.agent_id}`)).body.status).toBe('active');
    expect((await token(agent, agent.secret)).status).toBe(200);
    // And a write that succeeds takes effect on the token path at once.
    await admin.patchAgent(agent.agent_id, { status: 'inactive' });
    expect((await token(agent, agent.secret)).body.error_code).toBe('agent_inactive');
  });

  it('secret rotate on a locked row: 503, and after the lock goes the old secret still works and the stored hash is unchanged', async () => {
    const agent = await warmAgent('locked-rotate');
    const [before] = await direct`SELECT secret_hash FROM agents WHERE id = ${agent.agent_id}`;
    await withRowLocked(agent.agent_id, async () => {
      expect503(await adminCall('POST', `/admin/v1/agents/${agent.agent_id}/secret/rotate`, {}), 'secret rotate');
    });
    const row = await settleRow(agent.agent_id);
    expect(row.secret_hash, 'the 503 rotation must not have been applied').toBe(before.secret_hash);
    expect((await token(agent, agent.secret)).status).toBe(200);
    // A rotation that succeeds revokes the old secret at once.
    const rotated = await admin.rotateSecret(agent.agent_id);
    expect((await token(agent, agent.secret)).status).toBe(401);
    expect((await token(agent, rotated.secret)).status).toBe(200);
  });

  it('black-holed store: key rotate and retire answer 503 with Retry-After promptly, change nothing, then work again', async () => {
    const next = await admin.rotateKey(); // a key that may be retired (it is not the active one)
    const before = (await admin.listKeys()).keys.map((k) => `${k.kid}:${k.state === 'retired'}`).sort();
    proxy.blackhole();
    try {
      expect503(await adminCall('POST', '/admin/v1/keys/rotate'), 'key rotate');
      expect503(await adminCall('POST', `/admin/v1/keys/${next.kid}/retire`), 'key retire');
      expect503(await adminCall('PATCH', `/admin/v1/agents/${crypto.randomUUID()}`, { status: 'inactive' }), 'agent PATCH');
    } finally {
      proxy.forward();
    }
    // The last /readyz answer goes into the failure message: which check stayed down.
    let lastReady = '';
    await waitFor(
      '/readyz 200 again',
      async () => {
        try {
          const response = await fetch(`${service.adminUrl}/readyz`, { signal: AbortSignal.timeout(5000) });
          lastReady = `${response.status} ${await response.text()}`;
          return response.status === 200;
        } catch (error) {
          lastReady = `no answer: ${(error as Error).message} ${String((error as { cause?: unknown }).cause ?? '')}`;
          return false;
        }
      },
      20_000,
      200,
    ).catch((error: Error) => {
      throw new Error(`${error.message}; last answer: ${lastReady}\nservice output:\n${service.output().slice(-3000)}`);
    });
    // The black-holed transactions never reached COMMIT: the key set is what it was.
    const after = (await admin.listKeys()).keys.map((k) => `${k.kid}:${k.state === 'retired'}`).sort();
    expect(after).toEqual(before);
    expect((await admin.retireKey(next.kid)).state).toBe('retired');
    expect((await admin.rotateKey()).state).toBe('next');
    expect(serverErrorsIn(await (await fetch(`${service.adminUrl}/metrics`)).text())).toEqual([]);
  });
});
