// A stopping pod must not take spooled audit events to its deletion while Postgres can take them: events
// spool while Postgres is out (a TCP proxy in this process cut, never the shared server), Postgres comes
// back, SIGTERM arrives before the trail's next probe, and after exit every event is in Postgres. When
// Postgres is still out, the process still exits within its bound and says what it left in the spool.
import { readdirSync } from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson } from '../../kit/admin.js';
import { metricSum } from '../../kit/metrics.js';
import { waitFor } from '../../kit/wait.js';
import { TcpProxy } from '../support/faults.js';
import { createDatabase, startService, type ServiceHandle, type TestDatabase } from '../support/service.js';

const jtiOf = (jwt: string): string => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString()).jti;

describe('SIGTERM with events in the audit spool', { timeout: 120_000 }, () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let proxiedUrl: string;
  const services: ServiceHandle[] = [];

  beforeAll(async () => {
    database = await createDatabase();
    proxy = new TcpProxy(5432);
    const url = new URL(database.url);
    url.port = String(await proxy.listen());
    proxiedUrl = url.toString();
  });
  afterAll(async () => {
    for (const service of services) await service.dispose();
    await proxy?.close();
    await database?.drop();
  });

  const start = async () => {
    const service = await startService({
      mode: 'real',
      database: { ...database, url: proxiedUrl },
      env: {
        RATE_LIMIT_TOKEN_POINTS: '100000',
        STORE_TIMEOUT_MS: '1000',
        AUDIT_WRITE_TIMEOUT_MS: '500',
        // The trail's own probe would drain long after the SIGTERM: only the shutdown can drain it.
        AUDIT_DRAIN_INTERVAL_MS: '60000',
        LOCAL_CACHE_TTL_MS: '600000',
        SHUTDOWN_TIMEOUT_MS: '8000',
      },
    });
    services.push(service);
    const admin = new AdminClient(service);
    const { platform, agent } = await admin.seed(['orders:read']);
    const body = { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id };
    expect((await postJson(`${service.publicUrl}/api/v1/auth/token`, body)).status).toBe(200); // warm
    return { service, body };
  };

  /** Tokens taken while Postgres is refused: their events are in the spool. */
  const spoolTokens = async (service: ServiceHandle, body: Record<string, unknown>, count: number): Promise<string[]> => {
    const jtis: string[] = [];
    proxy.refuse();
    while (jtis.length < count) {
      const answer = await postJson(`${service.publicUrl}/api/v1/auth/token`, body);
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      jtis.push(jtiOf(answer.body.access_token));
    }
    const metrics = await (await fetch(`${service.adminUrl}/metrics`)).text();
    expect(metricSum(metrics, 'ace_audit_spool_events')).toBeGreaterThanOrEqual(count);
    return jtis;
  };

  const inTrail = async (jtis: string[]): Promise<string[]> => {
    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      const rows = await sql`SELECT jti::text AS jti FROM audit_events WHERE type = 'token.issued' AND jti::text = ANY(${jtis})`;
      return rows.map((r) => r.jti as string);
    } finally {
      await sql.end();
    }
  };

  it('Postgres back before the SIGTERM: the process drains the spool before it exits, and every event is in Postgres', async () => {
    const { service, body } = await start();
    const jtis = await spoolTokens(service, body, 30);
    proxy.forward();
    const exit = await service.stop('SIGTERM');
    expect(exit.code, service.output().slice(-3000)).toBe(0);
    const stored = await inTrail(jtis);
    expect(jtis.filter((jti) => !stored.includes(jti)), 'spooled events missing from Postgres after exit').toEqual([]);
    expect(readdirSync(path.join(service.dataDir, 'audit-spool')).filter((f) => /\.(open|ready)$/.test(f))).toEqual([]);
    expect(service.output()).not.toContain('exiting with events still in the spool');
  });

  it('Postgres still out: the process exits within its bound and logs how many events it left in the spool', async () => {
    const { service, body } = await start();
    const jtis = await spoolTokens(service, body, 5);
    try {
      const exit = await service.stop('SIGTERM');
      expect(exit.code, service.output().slice(-4000)).toBe(0);
    } finally {
      proxy.forward();
    }
    const left = service
      .output()
      .split('\n')
      .filter((line) => line.includes('exiting with events still in the spool'))
      .map((line) => JSON.parse(line) as { events: number; within_ms: number });
    expect(left, service.output().slice(-3000)).toHaveLength(1);
    expect(left[0].events).toBeGreaterThanOrEqual(jtis.length);
    expect(left[0].within_ms).toBeGreaterThan(0);
    expect(readdirSync(path.join(service.dataDir, 'audit-spool')).some((f) => /\.(open|ready)$/.test(f))).toBe(true);
  });
});
