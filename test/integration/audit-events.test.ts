// The audit trail through the real admin API: every event type is recorded with the ids and fields it
// concerns and never a secret, hash, key material or the admin token; filters and cursor pagination;
// `ace events --follow` sees a new event. Bad parameters (422 naming the parameter) are checked in process:
// test/in-process/admin-validation.test.ts.
import { spawn } from 'node:child_process';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { metricSum } from '../../kit/metrics.js';
import { waitFor } from '../../kit/wait.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/src/cli/main.js');
const ALL_TYPES = [
  'token.issued', 'token.refused', 'token.refusals_aggregated', 'listing.served', 'agent.created', 'agent.updated', 'agent.secret_rotated', 'grant.put',
  'grant.deleted', 'platform.created', 'platform.updated', 'key.rotated', 'key.retired', 'admin.auth_failed',
];

type Event = Record<string, any> & { id: string; type: string; at: string };

async function events(service: ServiceHandle, query = ''): Promise<{ status: number; body: any }> {
  const response = await fetch(`${service.adminUrl}/admin/v1/events${query}`, { headers: { authorization: `Bearer ${service.adminToken}` } });
  return { status: response.status, body: await response.json() };
}

/** Every event matching `query`, following next_cursor to the end. */
async function allEvents(service: ServiceHandle, query: Record<string, string> = {}): Promise<Event[]> {
  const out: Event[] = [];
  let cursor: string | null = null;
  do {
    const params = new URLSearchParams({ ...query, limit: '1000', ...(cursor ? { cursor } : {}) });
    const page = await events(service, `?${params}`);
    expect(page.status).toBe(200);
    out.push(...page.body.events);
    cursor = page.body.next_cursor;
  } while (cursor);
  return out;
}

const token = (service: ServiceHandle, agent: { api_key_id: string }, secret: string, platformId: string, extra: Record<string, unknown> = {}) =>
  postJson(`${service.publicUrl}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret, platform_id: platformId, ...extra });

describe('audit trail (real Postgres and Redis)', () => {
  let service: ServiceHandle;
  let admin: AdminClient;
  let platform: PlatformRecord;
  let agent: AgentCredentials;
  const secrets: string[] = [];
  let issuedJti = '';
  let kid = '';

  beforeAll(async () => {
    // Credential refusals: 2 rows per address and agent in a 3 s window, the rest aggregated (docs/audit.md).
    service = await startService({
      mode: 'real',
      env: { RATE_LIMIT_AUTH_FAIL_POINTS: '1000', AUDIT_REFUSALS_PER_WINDOW: '2', AUDIT_REFUSAL_WINDOW_SECONDS: '3' },
    });
    admin = new AdminClient(service);
    platform = await admin.createPlatform({
      name: 'Shop',
      domain: 'shop.example',
      scopes: [{ name: 'orders:read' }, { name: 'orders:write' }],
    });
    await admin.patchPlatform(platform.platform_id, { verification_status: 'verified' });
    agent = await admin.createAgent('audited');
    secrets.push(agent.secret);
    await admin.grant(agent.agent_id, platform.platform_id, ['orders:read', 'orders:write']);
    await admin.patchAgent(agent.agent_id, { name: 'audited-2' });

    const issued = await token(service, agent, agent.secret, platform.platform_id, { scopes: ['orders:read'] });
    expect(issued.status).toBe(200);
    const [header, payload] = issued.body.access_token.split('.').slice(0, 2).map((p: string) => JSON.parse(Buffer.from(p, 'base64url').toString()));
    issuedJti = payload.jti;
    kid = header.kid;
    expect((await token(service, agent, 'wrong-secret', platform.platform_id)).status).toBe(401);
    expect((await token(service, agent, agent.secret, platform.platform_id, { scopes: ['orders:delete'] })).status).toBe(403);
    // 7 more in a row span at most 3 windows (well under 6 s): one window holds 3 or more, past its bound of 2.
    for (let i = 0; i < 7; i++) expect((await token(service, agent, 'wrong-again', platform.platform_id)).status).toBe(401);
    expect((await postJson(`${service.publicUrl}/api/v1/auth/agents/me/platforms`, { api_key_id: agent.api_key_id, secret: agent.secret })).status).toBe(200);

    const rotated = await admin.rotateSecret(agent.agent_id, 30);
    secrets.push(rotated.secret);
    await admin.revoke(agent.agent_id, platform.platform_id);
    const newKey = await admin.rotateKey();
    await admin.retireKey(newKey.kid);
    const refused = await fetch(`${service.adminUrl}/admin/v1/agents`, { headers: { authorization: 'Bearer not-the-admin-token' } });
    expect(refused.status).toBe(401);
  });

  afterAll(async () => {
    await service?.dispose();
  });

  it('records every event type with the ids and fields it concerns', async () => {
    let all: Event[] = [];
    // Refusals, listings and failed admin checks are written in the next batch, after their answer.
    await waitFor('every event type in the trail', async () => {
      all = await allEvents(service);
      return ALL_TYPES.every((t) => all.some((e) => e.type === t));
    });
    for (const e of all) {
      expect(e.id).toMatch(/^[0-9a-f-]{36}$/);
      expect(e.at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    }
    expect(new Set(all.map((e) => e.id)).size).toBe(all.length);
    const one = (type: string, match: Record<string, unknown> = {}) => {
      const found = all.filter((e) => e.type === type && Object.entries(match).every(([k, v]) => e[k] === v));
      expect(found.length, `${type} ${JSON.stringify(match)}`).toBeGreaterThan(0);
      return found[0];
    };
    expect(one('token.issued')).toMatchObject({
      jti: issuedJti,
      agent_id: agent.agent_id,
      platform_id: platform.platform_id,
      scope: 'orders:read',
      kid,
      client_address: '127.0.0.1',
    });
    expect(one('token.refused', { error_code: 'invalid_credentials' })).toMatchObject({ agent_id: agent.agent_id, api_key_id: agent.api_key_id });
    expect(one('token.refused', { error_code: 'invalid_scope' })).toMatchObject({ agent_id: agent.agent_id, platform_id: platform.platform_id });
    const aggregate = one('token.refusals_aggregated', { client_address: '127.0.0.1' });
    expect(aggregate.refusals).toBe(aggregate.error_codes.invalid_credentials);
    expect(aggregate.window_seconds).toBe(3);
    expect(one('token.refusals_aggregated', { agent_id: agent.agent_id }).refusals).toBeGreaterThan(0);
    expect(one('listing.served')).toMatchObject({ agent_id: agent.agent_id });
    expect(one('agent.created')).toMatchObject({ agent_id: agent.agent_id, actor: 'admin', fields: ['name'] });
    expect(one('agent.updated')).toMatchObject({ agent_id: agent.agent_id, actor: 'admin', fields: ['name'] });
    expect(one('agent.secret_rotated')).toMatchObject({ agent_id: agent.agent_id, actor: 'admin', grace_seconds: 30 });
    expect(one('grant.put')).toMatchObject({ agent_id: agent.agent_id, platform_id: platform.platform_id, scopes: ['orders:read', 'orders:write'] });
    expect(one('grant.deleted')).toMatchObject({ agent_id: agent.agent_id, platform_id: platform.platform_id, actor: 'admin' });
    expect(one('platform.created')).toMatchObject({ platform_id: platform.platform_id, actor: 'admin', fields: ['domain', 'name', 'scopes'] });
    expect(one('platform.updated')).toMatchObject({ platform_id: platform.platform_id, fields: ['verification_status'] });
    expect(one('key.rotated').kid).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(one('key.retired').kid).toBe(one('key.rotated').kid);
    expect(one('admin.auth_failed')).toMatchObject({ client_address: '127.0.0.1', request: 'GET /admin/v1/agents' });
  });

  it('never holds a secret, a hash, key material or the admin token, in any event type', async () => {
    const all = await allEvents(service);
    expect(new Set(all.map((e) => e.type))).toEqual(new Set(ALL_TYPES));
    // The API answer and the table itself (every column, every partition).
    const sql = postgres(service.database!.url, { max: 1, onnotice: () => {} });
    const rows = await sql`SELECT row_to_json(e)::text AS row FROM audit_events e`;
    const hashes = await sql`SELECT secret_hash, previous_secret_hash FROM agents`;
    const keys = await sql`SELECT public_jwk, private_key_encrypted FROM signing_keys`;
    await sql.end();
    expect(rows.length).toBe(all.length);
    const forbidden = [
      ...secrets,
      service.adminToken,
      ...hashes.flatMap((h) => [h.secret_hash, h.previous_secret_hash].filter(Boolean)),
      ...keys.flatMap((k) => [k.private_key_encrypted, k.public_jwk.n]),
    ];
    for (const text of [JSON.stringify(all), ...rows.map((r) => r.row)]) {
      for (const value of forbidden) expect(text.includes(value)).toBe(false);
      expect(text).not.toMatch(/\$argon2|BEGIN (RSA |ENCRYPTED )?PRIVATE KEY|"(secret|secret_hash|password|token|access_token|n|d|p|q)":/);
    }
  });

  it('filters by type, agent, platform and time, and pages with a cursor, oldest first', async () => {
    for (let i = 0; i < 5; i++) expect((await token(service, agent, 'wrong', platform.platform_id)).status).toBe(401);
    // 14 credential refusals in all, each either a token.refused row or counted in its address's
    // aggregate (this one address is past its bound in every window where the agent is).
    await waitFor('refusals recorded or aggregated', async () => {
      const rows = await allEvents(service, { type: 'token.refused,token.refusals_aggregated' });
      const counted = rows.filter((e) => e.type === 'token.refusals_aggregated' && e.client_address === '127.0.0.1').reduce((n, e) => n + e.refusals, 0);
      return rows.filter((e) => e.type === 'token.refused').length + counted === 14;
    });
    const all = await allEvents(service);
    const ordered = [...all].sort((a, b) => a.at.localeCompare(b.at) || a.id.localeCompare(b.id));
    expect(all.map((e) => e.id)).toEqual(ordered.map((e) => e.id));

    // Pages of 2 add up to the whole trail, without gaps or repeats.
    const paged: Event[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await events(service, `?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      expect(page.body.events.length).toBeLessThanOrEqual(2);
      paged.push(...page.body.events);
      cursor = page.body.next_cursor;
      pages++;
    } while (cursor);
    expect(paged.map((e) => e.id)).toEqual(all.map((e) => e.id));
    expect(pages).toBe(Math.ceil(all.length / 2));

    const twoTypes = await allEvents(service, { type: 'grant.put,grant.deleted' });
    expect(new Set(twoTypes.map((e) => e.type))).toEqual(new Set(['grant.put', 'grant.deleted']));
    expect(twoTypes.length).toBe(all.filter((e) => e.type.startsWith('grant.')).length);
    const byAgent = await allEvents(service, { agent_id: agent.agent_id });
    expect(byAgent.length).toBe(all.filter((e) => e.agent_id === agent.agent_id).length);
    expect(byAgent.every((e) => e.agent_id === agent.agent_id)).toBe(true);
    const byPlatform = await allEvents(service, { platform_id: platform.platform_id.toUpperCase() });
    expect(byPlatform.length).toBe(all.filter((e) => e.platform_id === platform.platform_id).length);

    // since is inclusive, until exclusive.
    const middle = all[Math.floor(all.length / 2)];
    const after = await allEvents(service, { since: middle.at });
    expect(after.length).toBe(all.filter((e) => e.at >= middle.at).length);
    const before = await allEvents(service, { until: middle.at });
    expect(before.length).toBe(all.filter((e) => e.at < middle.at).length);
    const offset = await allEvents(service, { since: middle.at.replace('Z', '+00:00') });
    expect(offset.length).toBe(after.length);
    expect((await events(service, '?since=2999-01-01T00:00:00Z')).body).toEqual({ events: [], next_cursor: null });
  });

  it('`ace events` prints a table by default and JSON lines with --json, with the filters of the API', async () => {
    const run = (args: string[]) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [CLI, ...args], {
          env: { PATH: process.env.PATH ?? '', ACE_ADMIN_URL: service.adminUrl, ACE_ADMIN_TOKEN: service.adminToken },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c) => (stdout += c));
        child.stderr.on('data', (c) => (stderr += c));
        child.on('close', (code) => resolve({ code, stdout, stderr }));
      });
    const table = await run(['events', '--type', 'grant.put', '--agent', agent.agent_id]);
    expect(table.code, table.stderr).toBe(0);
    const [header, ...rows] = table.stdout.trim().split('\n');
    expect(header.split(/\s+/)).toEqual(['AT', 'TYPE', 'AGENT_ID', 'PLATFORM_ID', 'DETAIL']);
    expect(rows.length).toBe(1);
    expect(rows[0]).toContain(agent.agent_id);
    expect(rows[0]).toContain('scopes=orders:read,orders:write');

    const lines = await run(['events', '--json', '--limit', '2']);
    expect(lines.code, lines.stderr).toBe(0);
    const parsed = lines.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(parsed.length).toBe(2);
    expect(lines.stderr).toMatch(/more events: --cursor \S+/);
    const next = await run(['events', '--json', '--limit', '2', '--cursor', /--cursor (\S+)/.exec(lines.stderr)![1]]);
    const second = next.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(second[0].id).not.toBe(parsed[0].id);
    expect(second[0].at >= parsed[1].at).toBe(true);

    const bad = await run(['events', '--since', 'yesterday']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('since');
  });

  it('`ace events --follow --json` prints a new event within a second of it happening', async () => {
    const polls = async () => metricSum(await fetch(`${service.adminUrl}/metrics`).then((r) => r.text()), 'ace_http_requests_total', { route: 'admin_events' });
    const before = await polls();
    const child = spawn(process.execPath, [CLI, 'events', '--follow', '--json', '--type', 'grant.put'], {
      env: { PATH: process.env.PATH ?? '', ACE_ADMIN_URL: service.adminUrl, ACE_ADMIN_TOKEN: service.adminToken },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    try {
      // Let it start polling (it reads from "now"), then make the change.
      await waitFor('ace events to poll', async () => (await polls()) > before, 20_000);
      const granted = await admin.createAgent('followed');
      await admin.grant(granted.agent_id, platform.platform_id, ['orders:read']);
      const changedAt = Date.now();
      await waitFor(`the grant.put event on ace's stdout (stderr: ${stderr})`, () => stdout.includes(granted.agent_id), 20_000, 20);
      const seenAfterMs = Date.now() - changedAt;
      const lines = stdout.trim().split('\n').map((l) => JSON.parse(l));
      const event = lines.find((e) => e.agent_id === granted.agent_id);
      expect(event).toMatchObject({ type: 'grant.put', platform_id: platform.platform_id, scopes: ['orders:read'] });
      expect(lines.every((e) => e.type === 'grant.put')).toBe(true);
      // Within a second on an idle machine; the bound here leaves room for a loaded shared CI box.
      expect(seenAfterMs).toBeLessThan(5000);
    } finally {
      child.kill('SIGTERM');
    }
  });
});
