// Through the real admin API on real Postgres: an admin change, its revocation entry and its
// audit event are one unit of work. The test makes the revocation append fail inside the service's own
// transaction (a trigger on revocation_entries of this test's database raising lock_not_available, what
// the append reports when it cannot take a platform's head row in time); every revoking change must then
// answer 503 + Retry-After and leave nothing behind. Without the trigger the same change succeeds with
// exactly its entries and one audit event. A second trigger, on audit_events, shows that a change whose
// event cannot be written is not made either.
import postgres, { type Sql } from 'postgres';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startService, type ServiceHandle } from '../support/service.js';
import { AdminClient, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';

let service: ServiceHandle;
let admin: AdminClient;
let db: Sql;

beforeAll(async () => {
  service = await startService({ mode: 'real', env: { KEY_PROPAGATION_SECONDS: '3600', RATE_LIMIT_TOKEN_POINTS: '1000000' } });
  admin = new AdminClient(service);
  db = postgres(service.database!.url, { max: 1, onnotice: () => {} });
  await db.unsafe(`
    CREATE FUNCTION uow_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'refused by test trigger' USING ERRCODE = '55P03'; END $$`);
}, 120_000);

afterAll(async () => {
  await db?.end();
  await service?.dispose();
});

async function failAppends(on: boolean): Promise<void> {
  await db.unsafe('DROP TRIGGER IF EXISTS uow_test_refuse ON revocation_entries');
  if (on) await db.unsafe('CREATE TRIGGER uow_test_refuse BEFORE INSERT ON revocation_entries FOR EACH STATEMENT EXECUTE FUNCTION uow_test_refuse()');
}

async function failAuditInserts(on: boolean): Promise<void> {
  await db.unsafe('DROP TRIGGER IF EXISTS uow_test_refuse ON audit_events');
  if (on) await db.unsafe('CREATE TRIGGER uow_test_refuse BEFORE INSERT ON audit_events FOR EACH STATEMENT EXECUTE FUNCTION uow_test_refuse()');
}

beforeEach(async () => {
  await failAuditInserts(false);
  await failAppends(true);
});

/** An admin request with its headers (AdminClient keeps only status and body). */
async function adminCall(method: string, path: string, body?: unknown) {
  const response = await fetch(`${service.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${service.adminToken}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, retryAfter: response.headers.get('retry-after'), body: text ? JSON.parse(text) : undefined };
}

async function tokenStatus(agent: { api_key_id: string; secret: string }, platformId: string): Promise<number> {
  const response = await fetch(`${service.publicUrl}/api/v1/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platformId }),
  });
  await response.arrayBuffer();
  return response.status;
}

function expectNotApplied(result: Awaited<ReturnType<typeof adminCall>>): void {
  expect(result.status).toBe(503);
  expect(result.body).toMatchObject({ error_code: 'service_unavailable' });
  expect(Number(result.retryAfter)).toBeGreaterThan(0);
}

const entries = async (column: 'agent_id' | 'platform_id' | 'kid', value: string) =>
  Number((await db`SELECT count(*)::int AS n FROM revocation_entries WHERE ${db(column)} = ${value}`)[0].n);

const events = async (type: string, column: 'agent_id' | 'platform_id' | 'kid', value: string) =>
  Number((await db`SELECT count(*)::int AS n FROM audit_events WHERE type = ${type} AND ${db(column)} = ${value}`)[0].n);

const grantOf = async (agentId: string, platformId: string) =>
  (await db`SELECT scopes FROM grants WHERE agent_id = ${agentId} AND platform_id = ${platformId}`)[0]?.scopes as string[] | undefined;

/** A fresh platform (read, write) and an agent granted both, which gets tokens. */
async function seed(): Promise<{ platform: PlatformRecord; agent: AgentCredentials }> {
  const platform = await admin.createPlatform({
    name: 'UoW',
    scopes: [
      { name: 'read', description: 'r' },
      { name: 'write', description: 'w' },
    ],
  });
  const agent = await admin.createAgent('uow-agent');
  await admin.grant(agent.agent_id, platform.platform_id, ['read', 'write']);
  expect(await tokenStatus(agent, platform.platform_id)).toBe(200);
  return { platform, agent };
}

describe('a revoking change whose revocation entry cannot be written is not made', () => {
  it('agent deactivation', async () => {
    const { platform, agent } = await seed();
    expectNotApplied(await adminCall('PATCH', `/admin/v1/agents/${agent.agent_id}`, { status: 'inactive' }));
    expect((await adminCall('GET', `/admin/v1/agents/${agent.agent_id}`)).body.status).toBe('active');
    expect(await tokenStatus(agent, platform.platform_id)).toBe(200);
    expect(await entries('agent_id', agent.agent_id)).toBe(0);
    expect(await events('agent.updated', 'agent_id', agent.agent_id)).toBe(0);

    await failAppends(false);
    expect((await adminCall('PATCH', `/admin/v1/agents/${agent.agent_id}`, { status: 'inactive' })).status).toBe(200);
    expect(await tokenStatus(agent, platform.platform_id)).toBe(403);
    expect(await entries('agent_id', agent.agent_id)).toBe(1);
    expect(await events('agent.updated', 'agent_id', agent.agent_id)).toBe(1);
  });

  it('grant removal', async () => {
    const { platform, agent } = await seed();
    expectNotApplied(await adminCall('DELETE', `/admin/v1/agents/${agent.agent_id}/grants/${platform.platform_id}`));
    expect(await grantOf(agent.agent_id, platform.platform_id)).toEqual(['read', 'write']);
    expect(await tokenStatus(agent, platform.platform_id)).toBe(200);
    expect(await entries('agent_id', agent.agent_id)).toBe(0);
    expect(await events('grant.deleted', 'agent_id', agent.agent_id)).toBe(0);

    await failAppends(false);
    expect((await adminCall('DELETE', `/admin/v1/agents/${agent.agent_id}/grants/${platform.platform_id}`)).status).toBe(204);
    expect(await grantOf(agent.agent_id, platform.platform_id)).toBeUndefined();
    expect(await entries('agent_id', agent.agent_id)).toBe(1);
    expect(await events('grant.deleted', 'agent_id', agent.agent_id)).toBe(1);
  });

  it('grant narrowing', async () => {
    const { platform, agent } = await seed();
    const narrow = () => adminCall('PUT', `/admin/v1/agents/${agent.agent_id}/grants/${platform.platform_id}`, { scopes: ['read'] });
    expectNotApplied(await narrow());
    expect(await grantOf(agent.agent_id, platform.platform_id)).toEqual(['read', 'write']);
    expect(await entries('agent_id', agent.agent_id)).toBe(0);
    // The seed's own grant.put is the only one.
    expect(await events('grant.put', 'agent_id', agent.agent_id)).toBe(1);

    await failAppends(false);
    expect((await narrow()).status).toBe(200);
    expect(await grantOf(agent.agent_id, platform.platform_id)).toEqual(['read']);
    expect(await entries('agent_id', agent.agent_id)).toBe(1);
    expect(await events('grant.put', 'agent_id', agent.agent_id)).toBe(2);
  });

  it('secret rotation without grace', async () => {
    const { platform, agent } = await seed();
    const [{ secret_hash: before }] = await db`SELECT secret_hash FROM agents WHERE id = ${agent.agent_id}`;
    expectNotApplied(await adminCall('POST', `/admin/v1/agents/${agent.agent_id}/secret/rotate`, {}));
    expect((await db`SELECT secret_hash FROM agents WHERE id = ${agent.agent_id}`)[0].secret_hash).toBe(before);
    expect(await tokenStatus(agent, platform.platform_id)).toBe(200);
    expect(await entries('agent_id', agent.agent_id)).toBe(0);
    expect(await events('agent.secret_rotated', 'agent_id', agent.agent_id)).toBe(0);

    await failAppends(false);
    const rotated = await adminCall('POST', `/admin/v1/agents/${agent.agent_id}/secret/rotate`, {});
    expect(rotated.status).toBe(200);
    expect(await tokenStatus(agent, platform.platform_id)).toBe(401);
    expect(await tokenStatus({ api_key_id: agent.api_key_id, secret: rotated.body.secret }, platform.platform_id)).toBe(200);
    expect(await entries('agent_id', agent.agent_id)).toBe(1);
    expect(await events('agent.secret_rotated', 'agent_id', agent.agent_id)).toBe(1);
  });

  for (const status of ['suspended', 'disabled'] as const) {
    it(`platform ${status}`, async () => {
      const { platform, agent } = await seed();
      expectNotApplied(await adminCall('PATCH', `/admin/v1/platforms/${platform.platform_id}`, { status }));
      expect((await adminCall('GET', `/admin/v1/platforms/${platform.platform_id}`)).body.status).toBe('active');
      expect(await tokenStatus(agent, platform.platform_id)).toBe(200);
      expect(await entries('platform_id', platform.platform_id)).toBe(0);
      expect(await events('platform.updated', 'platform_id', platform.platform_id)).toBe(0);

      await failAppends(false);
      expect((await adminCall('PATCH', `/admin/v1/platforms/${platform.platform_id}`, { status })).status).toBe(200);
      expect(await tokenStatus(agent, platform.platform_id)).not.toBe(200);
      expect(await entries('platform_id', platform.platform_id)).toBe(1);
      expect(await events('platform.updated', 'platform_id', platform.platform_id)).toBe(1);
    });
  }

  it('dropping a scope from the catalogue', async () => {
    const { platform, agent } = await seed();
    const drop = () => adminCall('PATCH', `/admin/v1/platforms/${platform.platform_id}`, { scopes: [{ name: 'read', description: 'r' }] });
    expectNotApplied(await drop());
    expect((await adminCall('GET', `/admin/v1/platforms/${platform.platform_id}`)).body.scopes.map((s: { name: string }) => s.name)).toEqual([
      'read',
      'write',
    ]);
    expect(await grantOf(agent.agent_id, platform.platform_id)).toEqual(['read', 'write']);
    expect(await entries('platform_id', platform.platform_id)).toBe(0);
    expect(await events('platform.updated', 'platform_id', platform.platform_id)).toBe(0);

    await failAppends(false);
    expect((await drop()).status).toBe(200);
    expect(await grantOf(agent.agent_id, platform.platform_id)).toEqual(['read']);
    expect(await entries('agent_id', agent.agent_id)).toBe(1);
    expect(await events('platform.updated', 'platform_id', platform.platform_id)).toBe(1);
  });

  it('key retirement', async () => {
    await seed();
    const { kid } = await admin.rotateKey(); // "next" for an hour: retirable, not active
    const retire = () => adminCall('POST', `/admin/v1/keys/${kid}/retire`);
    expectNotApplied(await retire());
    expect((await admin.listKeys()).keys.find((k) => k.kid === kid)?.state).toBe('next');
    expect((await db`SELECT retired_at FROM signing_keys WHERE kid = ${kid}`)[0].retired_at).toBeNull();
    expect(await entries('kid', kid)).toBe(0);
    expect(await events('key.retired', 'kid', kid)).toBe(0);

    await failAppends(false);
    expect((await retire()).status).toBe(200);
    expect((await admin.listKeys()).keys.find((k) => k.kid === kid)?.state).toBe('retired');
    // One entry in the feed of every platform.
    const [{ n: platforms }] = await db`SELECT count(*)::int AS n FROM platforms`;
    expect(await entries('kid', kid)).toBe(platforms);
    expect(await events('key.retired', 'kid', kid)).toBe(1);
  });
});

describe('a change whose audit event cannot be written is not made', () => {
  it('agent creation, grant widening and platform creation answer 503 and change nothing', async () => {
    const { platform, agent } = await seed();
    await failAppends(false);
    await db`UPDATE grants SET scopes = '{read}' WHERE agent_id = ${agent.agent_id}`;
    const [{ n: agentsBefore }] = await db`SELECT count(*)::int AS n FROM agents`;
    const [{ n: platformsBefore }] = await db`SELECT count(*)::int AS n FROM platforms`;
    await failAuditInserts(true);
    try {
      expectNotApplied(await adminCall('POST', '/admin/v1/agents', { name: 'never' }));
      expectNotApplied(await adminCall('PUT', `/admin/v1/agents/${agent.agent_id}/grants/${platform.platform_id}`, { scopes: ['read', 'write'] }));
      expectNotApplied(await adminCall('POST', '/admin/v1/platforms', { name: 'never', scopes: [{ name: 'x' }] }));
    } finally {
      await failAuditInserts(false);
    }
    expect((await db`SELECT count(*)::int AS n FROM agents`)[0].n).toBe(agentsBefore);
    expect((await db`SELECT count(*)::int AS n FROM platforms`)[0].n).toBe(platformsBefore);
    expect(await grantOf(agent.agent_id, platform.platform_id)).toEqual(['read']);

    expect((await adminCall('PUT', `/admin/v1/agents/${agent.agent_id}/grants/${platform.platform_id}`, { scopes: ['read', 'write'] })).status).toBe(200);
    expect(await grantOf(agent.agent_id, platform.platform_id)).toEqual(['read', 'write']);
    expect(await entries('agent_id', agent.agent_id)).toBe(0); // widening takes nothing back
    expect(await events('grant.put', 'agent_id', agent.agent_id)).toBe(2);
  });
});
