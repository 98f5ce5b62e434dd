// The trail never loses a token: every token a client received is in it (by jti) after the service is
// SIGKILLed under load (real Postgres, and the embedded default); with Postgres unreachable (a TCP
// proxy in this process cut, never the shared server) tokens keep flowing, events spool to DATA_DIR,
// and once Postgres is back the trail is complete without duplicates; when neither Postgres nor the
// spool can take an event, the token endpoint answers 503 with Retry-After. Retention drops old
// partitions.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson } from '../../kit/admin.js';
import { createDatabase, startService, type ServiceHandle, type TestDatabase } from '../support/service.js';
import { TcpProxy } from '../support/faults.js';
import { metricSum } from '../../kit/metrics.js';
import { sleep, waitFor } from '../../kit/wait.js';

const LOAD_ENV = { RATE_LIMIT_TOKEN_POINTS: '1000000', RATE_LIMIT_AUTH_FAIL_POINTS: '1000000' };

interface Load {
  /** jti of every token a client received. */
  jtis: string[];
  statuses: Map<number, number>;
  stop(): Promise<void>;
}

function jtiOf(accessToken: string): string {
  return JSON.parse(Buffer.from(accessToken.split('.')[1], 'base64url').toString()).jti;
}

/** `clients` loops asking for tokens until stopped (or until the service is gone). */
function startLoad(service: ServiceHandle, body: Record<string, unknown>, clients = 8): Load {
  const load: Load = { jtis: [], statuses: new Map(), stop: async () => {} };
  let running = true;
  const loops = Array.from({ length: clients }, async () => {
    while (running) {
      try {
        const answer = await postJson(`${service.publicUrl}/api/v1/auth/token`, body);
        load.statuses.set(answer.status, (load.statuses.get(answer.status) ?? 0) + 1);
        if (answer.status === 200) load.jtis.push(jtiOf(answer.body.access_token));
        else await sleep(20);
      } catch {
        await sleep(20); // connection refused: the service is down
      }
    }
  });
  load.stop = async () => {
    running = false;
    await Promise.all(loops);
  };
  return load;
}

async function seed(service: ServiceHandle) {
  const admin = new AdminClient(service);
  const { platform, agent } = await admin.seed(['orders:read']);
  const body = { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id };
  expect((await postJson(`${service.publicUrl}/api/v1/auth/token`, body)).status).toBe(200); // warm
  return { admin, platform, agent, body };
}

async function trailJtis(url: string): Promise<{ jtis: string[]; rows: number; distinctIds: number }> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const rows = await sql`SELECT jti::text AS jti FROM audit_events WHERE type = 'token.issued'`;
    const [{ n, d }] = await sql`SELECT count(*)::int AS n, count(DISTINCT id)::int AS d FROM audit_events`;
    return { jtis: rows.map((r) => r.jti), rows: n, distinctIds: d };
  } finally {
    await sql.end();
  }
}

async function apiJtis(service: ServiceHandle): Promise<string[]> {
  const out: string[] = [];
  let cursor: string | null = null;
  do {
    const params = new URLSearchParams({ type: 'token.issued', limit: '1000', ...(cursor ? { cursor } : {}) });
    const response = await fetch(`${service.adminUrl}/admin/v1/events?${params}`, { headers: { authorization: `Bearer ${service.adminToken}` } });
    expect(response.status).toBe(200);
    const page = (await response.json()) as { events: { jti: string }[]; next_cursor: string | null };
    out.push(...page.events.map((e) => e.jti));
    cursor = page.next_cursor;
  } while (cursor);
  return out;
}

const metrics = async (service: ServiceHandle) => (await fetch(`${service.adminUrl}/metrics`)).text();

function expectAllIn(received: string[], trail: string[]): void {
  const inTrail = new Set(trail);
  const missing = received.filter((jti) => !inTrail.has(jti));
  expect(missing, `${missing.length} of ${received.length} received tokens are missing from the trail`).toEqual([]);
  // Each token once.
  expect(trail.length).toBe(inTrail.size);
}

describe('audit durability', { timeout: 180_000 }, () => {
  const disposals: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const dispose of disposals.reverse()) await dispose().catch(() => {});
  });

  it('SIGKILL under load (real Postgres): after restart every token a client received is in the trail', async () => {
    const database = await createDatabase();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ace-audit-'));
    const prefix = `ace-test-${randomBytes(4).toString('hex')}:`;
    disposals.push(() => database.drop(), async () => rmSync(dataDir, { recursive: true, force: true }));
    const first = await startService({ mode: 'real', database, dataDir, redisKeyPrefix: prefix, env: LOAD_ENV });
    disposals.push(() => first.dispose());
    const { body } = await seed(first);

    const load = startLoad(first, body);
    await waitFor('tokens under load', () => load.jtis.length >= 300, 60_000, 10);
    await first.stop('SIGKILL');
    await load.stop();
    const received = [...load.jtis];

    const second = await startService({ mode: 'real', database, dataDir, redisKeyPrefix: prefix, env: LOAD_ENV });
    disposals.push(() => second.dispose());
    const trail = await trailJtis(database.url);
    expectAllIn(received, trail.jtis);
    expect(trail.rows).toBe(trail.distinctIds);
  });

  it('SIGKILL under load (embedded default): after restart every token a client received is in the trail', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ace-audit-'));
    disposals.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    const first = await startService({ mode: 'embedded', dataDir, env: LOAD_ENV });
    disposals.push(() => first.dispose());
    const { body } = await seed(first);

    const load = startLoad(first, body, 4);
    await waitFor('tokens under load', () => load.jtis.length >= 150, 60_000, 10);
    await first.stop('SIGKILL');
    await load.stop();
    const received = [...load.jtis];

    const second = await startService({ mode: 'embedded', dataDir, env: LOAD_ENV });
    disposals.push(() => second.dispose());
    expectAllIn(received, await apiJtis(second));
  });

  describe('Postgres unreachable', () => {
    let database: TestDatabase;
    let proxy: TcpProxy;
    let proxiedUrl: string;

    const startProxied = async (env: Record<string, string> = {}, dataDir?: string, redisKeyPrefix?: string) => {
      const service = await startService({
        mode: 'real',
        database: { ...database, url: proxiedUrl },
        dataDir,
        redisKeyPrefix,
        env: {
          ...LOAD_ENV,
          STORE_TIMEOUT_MS: '1000',
          AUDIT_WRITE_TIMEOUT_MS: '500',
          AUDIT_DRAIN_INTERVAL_MS: '200',
          // The agent's view stays in process for the whole outage: what is under test is the trail,
          // not how long Redis keeps answering on a loaded machine (reliability-postgres covers that).
          LOCAL_CACHE_TTL_MS: '600000',
          ...env,
        },
      });
      disposals.push(() => service.dispose());
      return service;
    };

    it('tokens keep flowing and events spool; once Postgres is back the trail is complete, without duplicates', async () => {
      database = await createDatabase();
      disposals.push(() => database.drop());
      proxy = new TcpProxy(5432);
      const port = await proxy.listen();
      disposals.push(() => proxy.close());
      const url = new URL(database.url);
      url.port = String(port);
      proxiedUrl = url.toString();

      const service = await startProxied();
      const { body } = await seed(service);
      const load = startLoad(service, body);
      try {
        await waitFor('tokens before the outage', () => load.jtis.length >= 100, 60_000, 10);

        for (const cut of ['refuse', 'blackhole'] as const) {
          proxy[cut]();
          const atCut = load.jtis.length;
          try {
            // Warm tokens keep coming (Redis and the in-process caches answer; the trail spools).
            await waitFor(`tokens during the outage (${cut})`, () => load.jtis.length >= atCut + 200, 60_000, 10).catch((error) => {
              throw new Error(`${error.message}; statuses ${JSON.stringify([...load.statuses])}\n${service.output().slice(-4000)}`);
            });
            const text = await metrics(service);
            expect(metricSum(text, 'ace_audit_events_written_total', { sink: 'spool' })).toBeGreaterThan(0);
            expect(metricSum(text, 'ace_audit_spool_events')).toBeGreaterThan(0);
            expect(readdirSync(path.join(service.dataDir, 'audit-spool')).length).toBeGreaterThan(0);
            // Reading the trail needs Postgres: a prompt 503, never a hang.
            const read = await fetch(`${service.adminUrl}/admin/v1/events`, { headers: { authorization: `Bearer ${service.adminToken}` } });
            expect(read.status).toBe(503);
            expect(Number(read.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
            expect(await read.json()).toMatchObject({ error_code: 'service_unavailable' });
          } finally {
            proxy.forward();
          }
          await waitFor('the spool drained', async () => metricSum(await metrics(service), 'ace_audit_spool_events') === 0, 60_000);
        }
      } finally {
        await load.stop();
      }
      expect(load.statuses.get(500)).toBeUndefined();
      await waitFor('the spool drained', async () => metricSum(await metrics(service), 'ace_audit_spool_events') === 0, 60_000);
      const trail = await trailJtis(database.url);
      expectAllIn(load.jtis, trail.jtis);
      expect(trail.rows).toBe(trail.distinctIds);
      expect(readdirSync(path.join(service.dataDir, 'audit-spool')).filter((f) => f.endsWith('.ready'))).toEqual([]);
    });

    it('a process killed while spooling leaves a spool that its successor drains', async () => {
      const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ace-audit-'));
      const prefix = `ace-test-${randomBytes(4).toString('hex')}:`;
      disposals.push(async () => rmSync(dataDir, { recursive: true, force: true }));
      const service = await startProxied({}, dataDir, prefix);
      const { body } = await seed(service);
      const before = new Set((await trailJtis(database.url)).jtis);
      proxy.refuse();
      const load = startLoad(service, body);
      let received: string[];
      try {
        await waitFor('tokens while spooling', () => load.jtis.length >= 200, 60_000, 10);
        await service.stop('SIGKILL');
      } finally {
        await load.stop();
        received = [...load.jtis];
        proxy.forward();
      }
      const inSpool = received.filter((jti) => !before.has(jti));
      expect(inSpool.length).toBeGreaterThan(0);
      const successor = await startProxied({}, dataDir, prefix);
      await waitFor('the orphaned spool drained', () => readdirSync(path.join(dataDir, 'audit-spool')).length === 0, 60_000);
      const trail = await trailJtis(database.url);
      expectAllIn(received, trail.jtis);
      expect(trail.rows).toBe(trail.distinctIds);
      await successor.stop();
    });

    it('when neither Postgres nor the spool can take the event, the token endpoint answers 503 with Retry-After', async () => {
      const service = await startProxied({ AUDIT_SPOOL_MAX_BYTES: '0' });
      const { body } = await seed(service);
      proxy.refuse();
      try {
        const answer = await postJson(`${service.publicUrl}/api/v1/auth/token`, body);
        expect(answer.status).toBe(503);
        expect(answer.body).toEqual({ detail: expect.any(String), error_code: 'service_unavailable' });
        expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        expect(metricSum(await metrics(service), 'ace_audit_write_failures_total')).toBeGreaterThan(0);
      } finally {
        proxy.forward();
      }
      await waitFor('tokens again once Postgres is back', async () => (await postJson(`${service.publicUrl}/api/v1/auth/token`, body)).status === 200, 30_000, 200);
    });
  });

  it('retention drops whole daily partitions older than AUDIT_RETENTION_DAYS and keeps the rest', async () => {
    const database = await createDatabase();
    disposals.push(() => database.drop());
    const service = await startService({ mode: 'real', database, env: { AUDIT_RETENTION_DAYS: '3', AUDIT_MAINTENANCE_INTERVAL_SECONDS: '1' } });
    disposals.push(() => service.dispose());
    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      const partitions = async () =>
        (await sql`SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'audit_events'::regclass`).map(
          (r) => r.relname as string,
        );
      const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
      const name = (offset: number) => `audit_events_p${day(offset).replace(/-/g, '')}`;
      // Partitions exist from yesterday to two days ahead.
      expect(await partitions()).toEqual(expect.arrayContaining([name(-1), name(0), name(1), name(2)]));

      // Old days, as a trail kept for a while would have them: one partition past retention, one within.
      for (const offset of [-10, -2]) {
        await sql.unsafe(`CREATE TABLE ${name(offset)} PARTITION OF audit_events FOR VALUES FROM ('${day(offset)}') TO ('${day(offset + 1)}')`);
        await sql`INSERT INTO audit_events (id, at, type) VALUES (gen_random_uuid(), ${day(offset) + 'T12:00:00Z'}::timestamptz, 'token.issued')`;
      }
      await waitFor('old partition dropped', async () => !(await partitions()).includes(name(-10)), 30_000);
      expect(await partitions()).toContain(name(-2));
      const [{ n }] = await sql`SELECT count(*)::int AS n FROM audit_events WHERE at < now() - interval '3 days'`;
      expect(n).toBe(0);
    } finally {
      await sql.end();
    }
  });
});
