// TRUST_PROXY_HOPS=1 with no proxy in front let any client choose its address through
// X-Forwarded-For (and spend someone else's failure budget). With a hop count, the header is now read
// only from a direct peer in TRUST_PROXY_PEERS (loopback and private ranges by default); from any other
// peer it is ignored, counted in ace_forwarded_for_ignored_total and logged at most once a minute.
// With proxy trust off (the default), X-Forwarded-For means a proxy nobody announced: counted under its own
// reason and warned about the same way, since every client behind it shares one address.
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { metricSum } from '../../kit/metrics.js';
import { waitFor } from '../../kit/wait.js';

async function refusedFrom(service: ServiceHandle): Promise<string[]> {
  const sql = postgres(service.database!.url, { max: 1, onnotice: () => {} });
  try {
    return (await sql`SELECT client_address FROM audit_events WHERE type = 'token.refused' ORDER BY at, id`).map((r) => r.client_address as string);
  } finally {
    await sql.end();
  }
}

describe('TRUST_PROXY_HOPS from a peer that is no proxy', () => {
  let service: ServiceHandle;
  let platform: PlatformRecord;
  let agent: AgentCredentials;

  beforeAll(async () => {
    // The test's loopback connections play a client reaching the service with no proxy in front: the
    // trusted proxies are elsewhere (192.0.2.0/24).
    service = await startService({ mode: 'real', env: { TRUST_PROXY_HOPS: '1', TRUST_PROXY_PEERS: '192.0.2.0/24', RATE_LIMIT_AUTH_FAIL_POINTS: '100' } });
    const admin = new AdminClient(service);
    ({ platform, agent } = await admin.seed(['orders:read']));
  });

  afterAll(async () => {
    await service?.dispose();
  });

  it('ignores the forwarded address, counts each such request and warns once', async () => {
    const metrics = async () => fetch(`${service.adminUrl}/metrics`).then((r) => r.text());
    expect(metricSum(await metrics(), 'ace_forwarded_for_ignored_total')).toBe(0);
    for (let i = 0; i < 5; i++) {
      const answer = await postJson(
        `${service.publicUrl}/api/v1/auth/token`,
        { api_key_id: agent.api_key_id, secret: 'wrong', platform_id: platform.platform_id },
        { 'x-forwarded-for': `203.0.113.${50 + i}` },
      );
      expect(answer.status).toBe(401);
    }
    // The refusals count against the real peer, not the addresses the client wrote.
    await waitFor('5 refusals in the trail', async () => (await refusedFrom(service)).length === 5);
    expect(await refusedFrom(service)).toEqual(Array(5).fill('127.0.0.1'));
    expect(metricSum(await metrics(), 'ace_forwarded_for_ignored_total', { reason: 'untrusted_peer' })).toBe(5);
    const warnings = service.output().split('\n').filter((l) => l.includes('X-Forwarded-For ignored'));
    expect(warnings.length).toBe(1);
    expect(JSON.parse(warnings[0])).toMatchObject({ level: 40, peer: '127.0.0.1', ignored: 1 }) // pino: 40 is warn;
    // A request without the header is nothing to report.
    await postJson(`${service.publicUrl}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret: 'wrong', platform_id: platform.platform_id });
    expect(metricSum(await metrics(), 'ace_forwarded_for_ignored_total')).toBe(5);
  });
});

describe('X-Forwarded-For with proxy trust off (TRUST_PROXY_HOPS=0)', () => {
  let service: ServiceHandle;
  let platform: PlatformRecord;
  let agent: AgentCredentials;

  beforeAll(async () => {
    service = await startService({ mode: 'real', env: { RATE_LIMIT_AUTH_FAIL_POINTS: '100' } });
    const admin = new AdminClient(service);
    ({ platform, agent } = await admin.seed(['orders:read']));
  });

  afterAll(async () => {
    await service?.dispose();
  });

  it('counts every request that carries the header, warns once a minute, and still counts the peer', async () => {
    const metrics = async () => fetch(`${service.adminUrl}/metrics`).then((r) => r.text());
    const ignored = async () => metricSum(await metrics(), 'ace_forwarded_for_ignored_total', { reason: 'trust_proxy_off' });
    expect(await ignored()).toBe(0);
    // Nothing to report without the header.
    await fetch(`${service.publicUrl}/.well-known/jwks.json`);
    await postJson(`${service.publicUrl}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret: 'wrong', platform_id: platform.platform_id });
    expect(await ignored()).toBe(0);
    expect(service.output()).not.toContain('X-Forwarded-For ignored');

    for (let i = 0; i < 3; i++) {
      const answer = await postJson(
        `${service.publicUrl}/api/v1/auth/token`,
        { api_key_id: agent.api_key_id, secret: 'wrong', platform_id: platform.platform_id },
        { 'x-forwarded-for': `203.0.113.${60 + i}` },
      );
      expect(answer.status).toBe(401);
    }
    // Any route: a proxy sets the header on every request it passes.
    expect((await fetch(`${service.publicUrl}/.well-known/jwks.json`, { headers: { 'x-forwarded-for': '203.0.113.70' } })).status).toBe(200);
    expect(await ignored()).toBe(4);
    expect(metricSum(await metrics(), 'ace_forwarded_for_ignored_total', { reason: 'untrusted_peer' })).toBe(0);
    const warnings = service.output().split('\n').filter((l) => l.includes('X-Forwarded-For ignored: TRUST_PROXY_HOPS=0'));
    expect(warnings.length).toBe(1);
    expect(JSON.parse(warnings[0])).toMatchObject({ level: 40, peer: '127.0.0.1', ignored: 1, listener: 'public' });
    // The header changed nothing: the refusals count against the peer.
    await waitFor('4 refusals in the trail', async () => (await refusedFrom(service)).length === 4);
    expect(new Set(await refusedFrom(service))).toEqual(new Set(['127.0.0.1']));
  });
});
