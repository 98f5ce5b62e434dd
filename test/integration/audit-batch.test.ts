// The audit trail's batch insert through the real interface (real Postgres and Redis): many concurrent
// token requests make multi-row batches, and the trail then holds exactly one token.issued row per token a
// client received, each with that token's own jti, kid, agent, platform, scope and client address (a batch
// that lost, repeated or shifted a column's rows would show here). A spool segment replayed by the drain
// (events already stored, and events repeated within the segment, as after a batch that timed out but
// committed) adds each event once, with values that need quoting in the statement (quotes, backslashes,
// commas, braces, the word NULL) stored as written.
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { metricSum } from '../../kit/metrics.js';
import { waitFor } from '../../kit/wait.js';
import { startService, type ServiceHandle } from '../support/service.js';

type Event = Record<string, any> & { id: string; type: string; at: string };

/** Every event matching `query`, following next_cursor to the end. */
async function allEvents(service: ServiceHandle, query: Record<string, string> = {}): Promise<Event[]> {
  const out: Event[] = [];
  let cursor: string | null = null;
  do {
    const params = new URLSearchParams({ ...query, limit: '1000', ...(cursor ? { cursor } : {}) });
    const response = await fetch(`${service.adminUrl}/admin/v1/events?${params}`, { headers: { authorization: `Bearer ${service.adminToken}` } });
    expect(response.status).toBe(200);
    const page = (await response.json()) as { events: Event[]; next_cursor: string | null };
    out.push(...page.events);
    cursor = page.next_cursor;
  } while (cursor);
  return out;
}

const decode = (part: string) => JSON.parse(Buffer.from(part, 'base64url').toString());

interface Issued {
  jti: string;
  kid: string;
  agent_id: string;
  platform_id: string;
  scope: string;
  client_address: string;
}

describe('audit batches (real Postgres and Redis)', { timeout: 180_000 }, () => {
  let service: ServiceHandle;
  let admin: AdminClient;
  let platforms: (PlatformRecord & { scopeNames: string[] })[];
  let agents: AgentCredentials[];
  const issued = new Map<string, Issued>();

  const requestToken = async (i: number) => {
    const agent = agents[i % agents.length];
    const platform = platforms[i % platforms.length];
    const address = `10.77.${(i >> 8) & 255}.${i & 255}`;
    const answer = await postJson(
      `${service.publicUrl}/api/v1/auth/token`,
      { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id },
      { 'x-forwarded-for': address },
    );
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    const [header, payload] = (answer.body.access_token as string).split('.').slice(0, 2).map(decode);
    issued.set(payload.jti, { jti: payload.jti, kid: header.kid, agent_id: agent.agent_id, platform_id: platform.platform_id, scope: payload.scope, client_address: address });
  };

  beforeAll(async () => {
    service = await startService({
      mode: 'real',
      env: { RATE_LIMIT_TOKEN_POINTS: '1000000', TRUST_PROXY_HOPS: '1', AUDIT_DRAIN_INTERVAL_MS: '200' },
    });
    admin = new AdminClient(service);
    platforms = [];
    for (const [i, scopes] of [['orders:read'], ['orders:read', 'orders:write'], ['stock:read']].entries()) {
      const platform = await admin.createPlatform({ name: `Shop ${i}`, domain: `shop${i}.example`, scopes: scopes.map((name) => ({ name })) });
      platforms.push({ ...platform, scopeNames: scopes });
    }
    agents = [];
    for (let a = 0; a < 5; a++) {
      const agent = await admin.createAgent(`batch-${a}`);
      for (const platform of platforms) await admin.grant(agent.agent_id, platform.platform_id, platform.scopeNames);
      agents.push(agent);
    }
    // Warm every agent (the cold path is not under test), its tokens counted like the others.
    for (let i = 0; i < agents.length * platforms.length; i++) await requestToken(i);
  }, 120_000);

  afterAll(async () => {
    await service?.dispose();
  });

  it('many concurrent tokens: exactly one token.issued row per token received, each with its own fields', async () => {
    const TOKENS = 600;
    const CONCURRENCY = 48;
    let next = 1000;
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < 1000 + TOKENS) await requestToken(next++);
    }));
    const events = await allEvents(service, { type: 'token.issued' });
    expect(events.length).toBe(issued.size);
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    for (const event of events) {
      const expected = issued.get(event.jti);
      expect(expected, `an event for a token nobody received: ${JSON.stringify(event)}`).toBeDefined();
      expect({ jti: event.jti, kid: event.kid, agent_id: event.agent_id, platform_id: event.platform_id, scope: event.scope, client_address: event.client_address }).toEqual(expected);
    }
    // The rows came in multi-row statements: what is under test is the batch, not one row at a time.
    const metrics = await (await fetch(`${service.adminUrl}/metrics`)).text();
    expect(metricSum(metrics, 'ace_audit_batch_size_sum')).toBeGreaterThan(metricSum(metrics, 'ace_audit_batch_size_count'));
  });

  it('a replayed spool segment stores each event once, with its values as written', async () => {
    const stored = await allEvents(service);
    const storedIssued = stored.filter((e) => e.type === 'token.issued');
    expect(storedIssued.length).toBeGreaterThan(10);
    // Events already in the trail, as the spool writes them (a batch that timed out but had committed) ...
    const replayed = storedIssued.slice(0, 10).map((e) => ({
      id: e.id,
      at: Date.parse(e.at),
      type: e.type,
      agentId: e.agent_id,
      platformId: e.platform_id,
      kid: e.kid,
      jti: e.jti,
      actor: null,
      clientAddress: e.client_address,
      data: { scope: e.scope },
    }));
    // ... and new ones, each twice in the segment, with values the statement must quote.
    const awkward = ['a "quoted" kid', 'back\\slash \\" and \\\\', 'comma, {braces}', 'NULL', '', 'ünïcödé ✓', "it's"];
    const fresh = awkward.map((text, i) => ({
      id: randomUUID(),
      at: Date.now() - 1000 + i,
      type: 'token.refused',
      agentId: i % 2 === 0 ? agents[0].agent_id : null,
      platformId: null,
      kid: text,
      jti: null,
      actor: null,
      clientAddress: text.slice(0, 64),
      data: { error_code: 'invalid_client', api_key_id: text },
    }));
    // A segment left by a dead process (a pid that has just exited): the drain claims it.
    const deadPid = spawnSync(process.execPath, ['-e', 'process.exit(0)']).pid!;
    const dir = path.join(service.dataDir, 'audit-spool');
    mkdirSync(dir, { recursive: true });
    const lines = [...replayed, ...fresh, ...fresh, ...replayed].map((e) => JSON.stringify(e)).join('\n') + '\n';
    const temporary = path.join(dir, 'replay.tmp');
    writeFileSync(temporary, lines);
    renameSync(temporary, path.join(dir, `spool-${deadPid}-0badc0de-1.ready`));

    await waitFor('the replayed segment drained', async () => (await allEvents(service, { type: 'token.refused' })).length >= fresh.length, 30_000, 100);
    await waitFor('the segment file removed', async () => readdirSync(dir).every((f) => !f.includes('0badc0de') && !f.endsWith('.ready')), 30_000, 100);
    const after = await allEvents(service);
    expect(after.length).toBe(stored.length + fresh.length);
    expect(new Set(after.map((e) => e.id)).size).toBe(after.length);
    const byId = new Map(after.map((e) => [e.id, e]));
    for (const e of fresh) {
      const row = byId.get(e.id);
      expect(row, `spooled event ${e.id} missing`).toBeDefined();
      expect(row).toEqual({
        id: e.id,
        type: 'token.refused',
        at: new Date(e.at).toISOString(),
        ...(e.agentId ? { agent_id: e.agentId } : {}),
        ...(e.kid ? { kid: e.kid, client_address: e.clientAddress } : {}),
        error_code: 'invalid_client',
        api_key_id: e.data.api_key_id,
      });
    }
    for (const e of storedIssued.slice(0, 10)) expect(byId.get(e.id)).toEqual(e);
    // An event already stored is skipped, not refused: nothing was set aside as a failure.
    const metrics = await (await fetch(`${service.adminUrl}/metrics`)).text();
    expect(metricSum(metrics, 'ace_audit_write_failures_total')).toBe(0);
  });
});
