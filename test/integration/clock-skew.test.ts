// An instance whose clock is off (a test-only preload shifts the service's Date, test/support/clock-offset.ts)
// measures its skew against Postgres' clock and exports it (ace_clock_skew_seconds). Beyond
// CLOCK_SKEW_MAX_SECONDS it refuses to issue tokens (503 + Retry-After) and logs why; within the bound it
// issues. Revocation cut-offs (iat_max) come from the database's clock whatever the clock of the instance
// that took the change. /readyz says not ready (503, the reason in its body) while the instance refuses
// tokens for its clock, and ready again once its clock is set right. Real Postgres; two service processes
// on one database.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson } from '../../kit/admin.js';
import { metricSum } from '../../kit/metrics.js';
import { waitFor } from '../../kit/wait.js';
import { createDatabase, startService, type ServiceHandle, type TestDatabase } from '../support/service.js';

const readyz = async (service: ServiceHandle) => {
  const response = await fetch(`${service.adminUrl}/readyz`);
  return { status: response.status, body: (await response.json()) as { status: string; checks: Record<string, unknown> } };
};

const skewOf = async (service: ServiceHandle) => metricSum(await (await fetch(`${service.adminUrl}/metrics`)).text(), 'ace_clock_skew_seconds');

describe('clock skew against the database', { timeout: 120_000 }, () => {
  let database: TestDatabase;
  let ahead: ServiceHandle;
  let behind: ServiceHandle;
  // The ahead instance's clock offset, in a file it reads again every 100 ms (test/support/clock-offset.ts).
  const offsetDir = mkdtempSync(path.join(os.tmpdir(), 'ace-clock-'));
  const offsetFile = path.join(offsetDir, 'offset-ms');

  beforeAll(async () => {
    database = await createDatabase();
    // Started with a right clock (a pod whose clock is off never becomes ready), then moved ahead.
    writeFileSync(offsetFile, '0');
    [ahead, behind] = await Promise.all([
      startService({ mode: 'real', database, clockOffsetFile: offsetFile }),
      // 30 s behind, with a bound wide enough to keep issuing: the bound is a setting.
      startService({ mode: 'real', database, clockOffsetMs: -30_000, env: { CLOCK_SKEW_MAX_SECONDS: '60' } }),
    ]);
    // 4 s ahead: past the default bound (1 s) and past REVOCATION_ISSUED_SLACK_SECONDS (2 s).
    writeFileSync(offsetFile, '4000');
    await waitFor('the ahead instance to see its skew', async () => (await skewOf(ahead)) > 3.5, 30_000);
  });
  afterAll(async () => {
    await ahead?.dispose();
    await behind?.dispose();
    await database?.drop();
    rmSync(offsetDir, { recursive: true, force: true });
  });

  it('exports the skew: + ahead, - behind, the round trip accounted for', async () => {
    expect(await skewOf(ahead)).toBeGreaterThan(3.5);
    expect(await skewOf(ahead)).toBeLessThan(4.5);
    expect(await skewOf(behind)).toBeLessThan(-29.5);
    expect(await skewOf(behind)).toBeGreaterThan(-30.5);
  });

  it('an instance beyond the bound answers 503 with Retry-After and says why; one within it issues', async () => {
    const { platform, agent } = await new AdminClient(behind).seed(['orders:read']);
    const body = { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id };

    const refused = await postJson(`${ahead.publicUrl}/api/v1/auth/token`, body);
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ error_code: 'service_unavailable' });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // The OAuth door is the same exchange.
    const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: agent.api_key_id, client_secret: agent.secret, audience: platform.platform_id });
    const oauth = await fetch(`${ahead.publicUrl}/oauth2/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form });
    expect(oauth.status).toBe(503);
    expect(ahead.output()).toMatch(/clock skew: refusing to issue tokens \(503\): this instance's clock is [\d.]+ s ahead of the database's \(CLOCK_SKEW_MAX_SECONDS=1\)/);

    const issued = await postJson(`${behind.publicUrl}/api/v1/auth/token`, body);
    expect(issued.status).toBe(200);
  });

  it('is not ready while its clock refuses tokens, saying why, and ready again once the clock is right and tokens are served', async () => {
    const { platform, agent } = await new AdminClient(behind).seed(['orders:read']);
    const body = { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id };
    expect((await postJson(`${ahead.publicUrl}/api/v1/auth/token`, body)).status).toBe(503);
    const notReady = await readyz(ahead);
    expect(notReady.status).toBe(503);
    expect(notReady.body.status).toBe('not_ready');
    expect(notReady.body.checks.clock_skew).toMatch(/this instance's clock is [\d.]+ s ahead of the database's \(CLOCK_SKEW_MAX_SECONDS=1\)/);
    expect(ahead.output()).toMatch(/not ready: this instance's clock is beyond CLOCK_SKEW_MAX_SECONDS/);
    // The one within its bound stays ready.
    expect((await readyz(behind)).status).toBe(200);

    writeFileSync(offsetFile, '0');
    await waitFor('the ahead instance to be ready again', async () => (await readyz(ahead)).status === 200, 30_000);
    expect((await readyz(ahead)).body.checks.clock_skew).toBe(false);
    expect((await postJson(`${ahead.publicUrl}/api/v1/auth/token`, body)).status).toBe(200);
    expect(ahead.output()).toMatch(/no longer degraded: this instance's clock is back within CLOCK_SKEW_MAX_SECONDS/);
  });

  it("revocation cut-offs come from the database's clock, not the clock of the instance that took the change", async () => {
    const admin = new AdminClient(behind);
    const { agent } = await admin.seed(['orders:read']);
    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      const dbNow = async () => Number((await sql`SELECT extract(epoch FROM clock_timestamp())::float8 AS now`)[0].now);
      const before = await dbNow();
      await admin.patchAgent(agent.agent_id, { status: 'inactive' });
      const after = await dbNow();
      const [entry] = await sql`SELECT iat_max::float8 AS iat_max FROM revocation_entries WHERE agent_id = ${agent.agent_id}`;
      // REVOCATION_ISSUED_SLACK_SECONDS (2) after the database's now, not 30 s before it.
      expect(Number(entry.iat_max)).toBeGreaterThanOrEqual(Math.floor(before) + 2);
      expect(Number(entry.iat_max)).toBeLessThanOrEqual(Math.floor(after) + 2);
    } finally {
      await sql.end();
    }
  });
});
