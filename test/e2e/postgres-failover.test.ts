// A Postgres switchover behind a multi-host DATABASE_URL in libpq's form (the issue's
// `postgres://u@h1,h2/db?target_session_attrs=read-write`): two service instances, a warm agent under load,
// admin writes all along. The primary stops, the standby is promoted. Tokens keep being issued (their
// audit events spooled and drained afterwards, none lost), admin writes answer 503 + Retry-After while no
// primary exists (never 500, never hung) and succeed again within seconds of the promotion; nothing
// acknowledged is missing afterwards, and a deactivation at one instance is refused at the other at once.
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { startPostgres, startStandby, stopAll, pollFor, waitForReplay, type PostgresNode } from '../../kit/topology/index.js';

const STORE_TIMEOUT_MS = 1000;

interface Outcome {
  status: number;
  retryAfter: string | null;
  ms: number;
  at: number;
  /** Why a request got no answer (status 0). */
  error?: string;
}

const jtiOf = (accessToken: string): string => JSON.parse(Buffer.from(accessToken.split('.')[1], 'base64url').toString()).jti;

describe('Postgres switchover behind a multi-host DATABASE_URL', () => {
  let primary: PostgresNode;
  let standby: PostgresNode;
  const services: ServiceHandle[] = [];
  let admins: AdminClient[];
  let platform: PlatformRecord;
  let warm: AgentCredentials;

  beforeAll(async () => {
    primary = await startPostgres();
    standby = await startStandby(primary);
    // The standby first: the pool must find the primary by itself, never writing to the standby.
    const url = `postgres://postgres@127.0.0.1:${standby.port},127.0.0.1:${primary.port}/postgres?target_session_attrs=read-write`;
    const database = { name: 'postgres', url, drop: async () => {} };
    const redisKeyPrefix = `ace-fo-${randomBytes(4).toString('hex')}:`;
    const env = {
      STORE_TIMEOUT_MS: String(STORE_TIMEOUT_MS),
      AUDIT_WRITE_TIMEOUT_MS: '1000',
      AUDIT_DRAIN_INTERVAL_MS: '200',
      RATE_LIMIT_TOKEN_POINTS: '1000000',
      RATE_LIMIT_AUTH_FAIL_POINTS: '1000000',
    };
    for (let i = 0; i < 2; i++) services.push(await startService({ mode: 'real', database, redisKeyPrefix, env }));
    admins = services.map((s) => new AdminClient(s));
    platform = await admins[0].createPlatform({
      name: 'Shop',
      domain: 'shop.example',
      verification_status: 'verified',
      scopes: [{ name: 'orders:read' }],
      routes: [{ method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] }],
    });
    warm = await admins[0].createAgent('warm');
    await admins[1].grant(warm.agent_id, platform.platform_id, ['orders:read']);
  }, 90_000);

  afterAll(async () => {
    await Promise.all(services.map((s) => s.dispose()));
    await stopAll();
  });

  afterEach((context) => {
    // A failed run shows how each instance ended and what it logged last (no secret is logged).
    if (context.task.result?.state !== 'fail') return;
    for (const [i, s] of services.entries()) {
      console.log(`instance ${i} (exit ${s.process.exitCode ?? s.process.signalCode ?? 'none: running'}):\n${s.output().slice(-4000)}`);
    }
  });

  const token = (service: ServiceHandle, agent: { api_key_id: string; secret: string }) =>
    postJson(`${service.publicUrl}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id });

  it('keeps issuing tokens, answers admin writes 503 (never 500 or hung) and recovers them within seconds, loses nothing', async () => {
    for (const s of services) {
      const readyz = (await (await fetch(`${s.adminUrl}/readyz`)).json()) as { checks: Record<string, unknown> };
      expect(readyz.checks.postgres_primary).toBe(`127.0.0.1:${primary.port}`);
      expect((await token(s, warm)).status).toBe(200); // warm: verified and cached at both instances
    }
    const tokens: (Outcome & { jti?: string })[] = [];
    const writes: (Outcome & { agentId?: string })[] = [];
    let running = true;

    const tokenLoop = async (service: ServiceHandle) => {
      while (running) {
        const started = performance.now();
        // A reset connection counts as a failure (status 0), reported with the rest.
        let error: string | undefined;
        const r = await token(service, warm).catch((e: Error) => void (error = `${e.message}${e.cause ? ` (${(e.cause as Error).message})` : ''}`));
        if (!r) tokens.push({ status: 0, retryAfter: null, ms: performance.now() - started, at: Date.now(), error });
        else tokens.push({ status: r.status, retryAfter: r.headers.get('retry-after'), ms: performance.now() - started, at: Date.now(), jti: r.status === 200 ? jtiOf(r.body.access_token) : undefined, error: r.status === 200 ? undefined : `${r.body?.error_code}: ${r.body?.detail}` });
      }
    };
    let n = 0;
    const writeLoop = async (service: ServiceHandle) => {
      while (running) {
        const started = performance.now();
        const r = await fetch(`${service.adminUrl}/admin/v1/agents`, {
          method: 'POST',
          headers: { authorization: `Bearer ${service.adminToken}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: `w-${n++}` }),
          signal: AbortSignal.timeout(15_000),
        }).catch(() => undefined);
        const body = (r ? await r.json().catch(() => ({})) : {}) as { agent_id?: string };
        writes.push({ status: r?.status ?? 0, retryAfter: r?.headers.get('retry-after') ?? null, ms: performance.now() - started, at: Date.now(), agentId: r?.status === 201 ? body.agent_id : undefined });
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };
    const loops = [...services.flatMap((s) => [tokenLoop(s), tokenLoop(s)]), ...services.map(writeLoop)];

    await pollFor('writes before the switchover', () => writes.filter((w) => w.status === 201).length >= 4, { timeoutMs: 20_000 });
    // Switchover, the safe order: a clean stop of the primary (its WAL reaches the standby), then promotion.
    await waitForReplay(primary, standby);
    const stoppedAt = Date.now();
    await primary.stop();
    await standby.promote();
    const promotedAt = Date.now();
    await pollFor('an admin write to succeed after the promotion', () => writes.some((w) => w.status === 201 && w.at > promotedAt), { timeoutMs: 20_000 });
    const backAt = writes.find((w) => w.status === 201 && w.at > promotedAt)!.at;
    // Keep the load a little longer on the new primary.
    const after = tokens.length;
    await pollFor('tokens after recovery', () => tokens.length > after + 50, { timeoutMs: 20_000 });
    running = false;
    await Promise.all(loops);

    console.info(`switchover: ${tokens.length} tokens (${tokens.filter((t) => t.status !== 200).length} not 200), ${writes.length} admin writes (${writes.filter((w) => w.status === 503).length} 503, slowest ${Math.round(Math.max(...writes.map((w) => w.ms)))} ms), no primary for ${promotedAt - stoppedAt} ms, writes back ${backAt - promotedAt} ms after the promotion`);
    // Tokens: >= 99 % answered 200, the rest 503 with Retry-After.
    const ok = tokens.filter((t) => t.status === 200);
    const others = tokens.filter((t) => t.status !== 200);
    const problems = () => services.map((s) => s.output().split('\n').filter((l) => /"level":(40|50|60)/.test(l)).slice(0, 30).join('\n')).join('\n');
    expect(ok.length / tokens.length, `tokens: ${tokens.length}, not 200: ${others.map((t) => t.status).join(',')} ${[...new Set(others.map((t) => t.error))].join('; ')}\n${problems()}`).toBeGreaterThanOrEqual(0.99);
    for (const t of others) {
      expect(t.status).toBe(503);
      expect(t.retryAfter).toMatch(/^[1-9]\d*$/);
    }
    expect(tokens.some((t) => t.status === 200 && t.at > stoppedAt && t.at < promotedAt) || promotedAt - stoppedAt < 200).toBe(true);

    // Admin writes: 201 or 503 + Retry-After, never 500, never past 10 s; back within 20 s of the promotion.
    expect(writes.filter((w) => w.status !== 201 && w.status !== 503), JSON.stringify(writes.filter((w) => w.status !== 201))).toEqual([]);
    for (const w of writes.filter((x) => x.status === 503)) expect(w.retryAfter).toMatch(/^[1-9]\d*$/);
    expect(Math.max(...writes.map((w) => w.ms))).toBeLessThan(10_000);
    expect(backAt - promotedAt).toBeLessThan(20_000);

    // Every acknowledged write is on the new primary.
    const acknowledged = writes.flatMap((w) => (w.agentId ? [w.agentId] : []));
    const present = new Set((await standby.query<{ id: string }>('SELECT id::text FROM agents')).map((r) => r.id));
    expect(acknowledged.filter((id) => !present.has(id))).toEqual([]);

    // Every token answered 200 has its token.issued event in the trail once the spools have drained.
    const jtis = ok.map((t) => t.jti!);
    let missing: string[] = jtis;
    await pollFor('every issued token in the audit trail', async () => {
      const rows = await standby.query<{ jti: string }>("SELECT jti::text FROM audit_events WHERE type = 'token.issued'");
      const seen = new Set(rows.map((r) => r.jti));
      missing = jtis.filter((j) => !seen.has(j));
      return missing.length === 0;
    }, { timeoutMs: 20_000 }).catch(() => undefined);
    expect(missing.length, `${missing.length} of ${jtis.length} issued tokens missing from the audit trail`).toBe(0);

    // Both instances report the new primary; a deactivation at one is refused at the other within 1 s.
    for (const s of services) {
      await pollFor('readyz to name the new primary', async () => ((await (await fetch(`${s.adminUrl}/readyz`)).json()) as { checks: Record<string, unknown> }).checks.postgres_primary === `127.0.0.1:${standby.port}`, { timeoutMs: 10_000 });
      const metrics = await (await fetch(`${s.adminUrl}/metrics`)).text();
      expect(metrics).toContain(`ace_postgres_primary_info{server="127.0.0.1:${standby.port}"} 1`);
      expect(metrics).not.toContain(`ace_postgres_primary_info{server="127.0.0.1:${primary.port}"}`);
      expect(s.output()).not.toMatch(/"status":500|internal_error/);
    }
    const victim = await admins[0].createAgent('victim');
    await admins[0].grant(victim.agent_id, platform.platform_id, ['orders:read']);
    expect((await token(services[1], victim)).status).toBe(200);
    await admins[0].patchAgent(victim.agent_id, { status: 'inactive' });
    const refusedAfter = await pollFor('the other instance to refuse the deactivated agent', async () => (await token(services[1], victim)).status === 403, { timeoutMs: 1000, intervalMs: 50 }).then(() => true);
    expect(refusedAfter).toBe(true);
  }, 110_000);
});
