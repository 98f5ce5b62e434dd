// Unauthenticated abuse of the audit trail: every refused token request used to write a
// durable token.refused row, 415 and 422 included, with no bound per address (107,000 rows in 10 s at
// 32 connections). Refusals before a credential check are now counted (metrics, one sampled log line per
// window), and refusals of credential checks are recorded one by one up to AUDIT_REFUSALS_PER_WINDOW per
// address and per agent, the rest summed in token.refusals_aggregated events (docs/audit.md).
import autocannon from 'autocannon';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { metricSum } from '../../kit/metrics.js';
import { waitFor } from '../../kit/wait.js';

const metricsText = async (service: ServiceHandle) => (await fetch(`${service.adminUrl}/metrics`)).text();

async function auditRows(service: ServiceHandle): Promise<Record<string, any>[]> {
  const sql = postgres(service.database!.url, { max: 1, onnotice: () => {} });
  try {
    return await sql`SELECT type, agent_id, client_address, data FROM audit_events ORDER BY at, id`;
  } finally {
    await sql.end();
  }
}

describe('refusals before a credential check are counted, not stored', () => {
  let service: ServiceHandle;

  beforeAll(async () => {
    service = await startService({ mode: 'real', env: { AUDIT_REFUSAL_WINDOW_SECONDS: '1' } });
  });

  afterAll(async () => {
    await service?.dispose();
  });

  it('10 s of malformed token requests at 32 connections add at most 1,000 rows, and all show in the metrics', async () => {
    const before = await metricsText(service);
    const rowsBefore = (await auditRows(service)).length;
    const url = `${service.publicUrl}/api/v1/auth/token`;
    const result = await autocannon({
      url,
      connections: 32,
      duration: 10,
      requests: [
        // 422: valid JSON, not a token request.
        { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"api_key_id":"nope"}' },
        // 415: not JSON at all.
        { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hello' },
      ],
    });
    const answered = result.non2xx;
    expect(answered).toBeGreaterThan(1000);
    const after = await metricsText(service);
    const refused = (text: string) =>
      metricSum(text, 'ace_tokens_issued_total', { outcome: 'validation_error' }) + metricSum(text, 'ace_tokens_issued_total', { outcome: 'unsupported_media_type' });
    // Every answered refusal is counted (autocannon may have given up on a few in flight at the end).
    expect(refused(after) - refused(before)).toBeGreaterThanOrEqual(answered);
    expect(metricSum(after, 'ace_tokens_issued_total', { outcome: 'unsupported_media_type' })).toBeGreaterThan(0);

    // The window's sampled log line says what was refused, from where.
    await waitFor('the sampled log line of the refusals', () => /refused before any credential check/.test(service.output()));
    const line = service.output().split('\n').find((l) => l.includes('refused before any credential check'))!;
    expect(JSON.parse(line)).toMatchObject({ example_address: '127.0.0.1', refused: { validation_error: expect.any(Number) } });

    const rows = await auditRows(service);
    expect(rows.length - rowsBefore).toBeLessThanOrEqual(1000);
    expect(rows.filter((r) => r.type === 'token.refused' || r.type === 'token.refusals_aggregated')).toEqual([]);
  });
});

describe('credential refusals are recorded up to a bound per address and per agent, then aggregated', () => {
  let service: ServiceHandle;
  let platform: PlatformRecord;
  let byAddress: AgentCredentials;
  let byAgent: AgentCredentials;

  beforeAll(async () => {
    service = await startService({
      mode: 'real',
      env: {
        AUDIT_REFUSALS_PER_WINDOW: '5',
        // One window for the whole test: its aggregates are written at shutdown.
        AUDIT_REFUSAL_WINDOW_SECONDS: '3600',
        RATE_LIMIT_AUTH_FAIL_POINTS: '1000',
        // The test chooses its client addresses through X-Forwarded-For.
        TRUST_PROXY_CIDRS: '127.0.0.1',
      },
    });
    const admin = new AdminClient(service);
    platform = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'orders:read' }] });
    byAddress = await admin.createAgent('one-address');
    byAgent = await admin.createAgent('many-addresses');
  });

  afterAll(async () => {
    await service?.dispose();
  });

  const wrong = (agent: AgentCredentials, forwardedFor?: string) =>
    postJson(
      `${service.publicUrl}/api/v1/auth/token`,
      { api_key_id: agent.api_key_id, secret: 'wrong', platform_id: platform.platform_id },
      forwardedFor ? { 'x-forwarded-for': forwardedFor } : {},
    );

  it('12 refusals from one address: 5 rows, then one aggregate for the address (and the agent)', async () => {
    for (let i = 0; i < 12; i++) expect((await wrong(byAddress)).status).toBe(401);
    // 12 refusals of one agent from 12 addresses: 5 rows, then one aggregate for the agent only.
    for (let i = 0; i < 12; i++) expect((await wrong(byAgent, `198.51.100.${i + 1}`)).status).toBe(401);
    // The 401s all count in the metrics.
    expect(metricSum(await metricsText(service), 'ace_tokens_issued_total', { outcome: 'invalid_credentials' })).toBe(24);

    // The window ends at shutdown, before the trail closes: its aggregates are durable.
    expect((await service.stop('SIGTERM')).code).toBe(0);
    const rows = await auditRows(service);
    const refused = rows.filter((r) => r.type === 'token.refused');
    const aggregated = rows.filter((r) => r.type === 'token.refusals_aggregated');

    expect(refused.filter((r) => r.agent_id === byAddress.agent_id).length).toBe(5);
    expect(refused.filter((r) => r.agent_id === byAgent.agent_id).length).toBe(5);
    expect(refused.filter((r) => r.agent_id === byAgent.agent_id).map((r) => r.client_address)).toEqual(
      ['198.51.100.1', '198.51.100.2', '198.51.100.3', '198.51.100.4', '198.51.100.5'],
    );
    const shape = (r: Record<string, any>) => ({ agent_id: r.agent_id, client_address: r.client_address, refusals: r.data.refusals, codes: r.data.error_codes });
    expect(aggregated.map(shape)).toEqual(
      expect.arrayContaining([
        { agent_id: null, client_address: '127.0.0.1', refusals: 7, codes: { invalid_credentials: 7 } },
        { agent_id: byAddress.agent_id, client_address: null, refusals: 7, codes: { invalid_credentials: 7 } },
        { agent_id: byAgent.agent_id, client_address: null, refusals: 7, codes: { invalid_credentials: 7 } },
      ]),
    );
    // Nothing for the 12 addresses: each stayed within its own bound.
    expect(aggregated.length).toBe(3);
    for (const r of aggregated) {
      expect(r.data.window_seconds).toBe(3600);
      expect(Date.parse(r.data.window_start)).toBeLessThan(Date.now());
    }
  });
});
