// A rolling update: the previous release (built from git history, scripts/previous-release.mjs) and
// this build run side by side on one Postgres database and one Redis, as pods of both do while a
// Deployment rolls. The compatibility policy (docs/operations.md, Rollouts) is checked from outside:
// one set of signing keys (each one's tokens verify with the other's JWKS, same issuer and lifetime),
// one rate limit per key across both, a deactivation through either one refused by both, and the
// revocation feed: both refuse it without a feed token, a feed token made through either serves the same
// events on both. Nothing an old instance does may weaken what the new one enforces. Data the old release
// cannot read (agents without secrets) waits for the rollout: 409 while an old instance is connected.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalJWKSet, decodeProtectedHeader, exportJWK, generateKeyPair, jwtVerify, type JSONWebKeySet } from 'jose';
import { AdminClient, postJson, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { redisKeyPrefix } from '../../kit/stores.js';
import { waitFor } from '../../kit/wait.js';
import { buildPreviousRelease, type PreviousRelease } from '../support/previous-release.js';
import { createDatabase, startService, type ServiceHandle, type TestDatabase } from '../support/service.js';

const ISSUER = 'https://ace.mixed.test';
const TOKEN_LIMIT = 6;

describe('the previous release beside this one, on one Postgres and one Redis', () => {
  let previous: PreviousRelease;
  let database: TestDatabase;
  let old: ServiceHandle;
  let current: ServiceHandle;
  let admin: { old: AdminClient; current: AdminClient };
  let platform: PlatformRecord;

  beforeAll(async () => {
    previous = buildPreviousRelease();
    console.log(`previous release ${previous.commit.slice(0, 12)}: ${previous.builtInMs === 0 ? 'from .ci/cache' : `built in ${(previous.builtInMs / 1000).toFixed(1)} s`}`);
    database = await createDatabase();
    const shared = {
      mode: 'real' as const,
      database,
      redisKeyPrefix: redisKeyPrefix('ace-mixed'),
      env: { PUBLIC_BASE_URL: ISSUER, RATE_LIMIT_TOKEN_POINTS: String(TOKEN_LIMIT), RATE_LIMIT_TOKEN_WINDOW_SECONDS: '600' },
    };
    // The old release first (it made the schema), then the new one joins, as in a rolling update.
    old = await startService({ ...shared, main: previous.main });
    current = await startService(shared);
    admin = { old: new AdminClient(old), current: new AdminClient(current) };
    platform = await admin.current.createPlatform({ name: 'Shop', domain: 'shop.example', scopes: [{ name: 'orders:read' }], routes: [] });
  }, 600_000);

  afterAll(async () => {
    await old?.dispose();
    await current?.dispose();
    await database?.drop();
  });

  const newAgent = async (name: string): Promise<AgentCredentials> => {
    const agent = await admin.current.createAgent(name);
    await admin.current.grant(agent.agent_id, platform.platform_id, ['orders:read']);
    return agent;
  };
  const token = (service: ServiceHandle, agent: AgentCredentials) =>
    postJson(`${service.publicUrl}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id });
  const jwks = async (service: ServiceHandle) => (await (await fetch(`${service.publicUrl}/.well-known/jwks.json`)).json()) as JSONWebKeySet;
  const feed = (service: ServiceHandle, feedToken?: string) =>
    fetch(`${service.publicUrl}/api/v1/platforms/${platform.platform_id}/revocations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(feedToken ? { authorization: `Bearer ${feedToken}` } : {}) },
      body: JSON.stringify({ ack: [], returnImmediately: true, maxEvents: 100 }),
    });

  it('one set of signing keys: each one\'s tokens verify with the other\'s JWKS, with the same issuer, audience and lifetime', async () => {
    const agent = await newAgent('keys');
    const [fromOld, fromCurrent] = [await token(old, agent), await token(current, agent)];
    expect(fromOld.status, JSON.stringify(fromOld.body)).toBe(200);
    expect(fromCurrent.status, JSON.stringify(fromCurrent.body)).toBe(200);
    const [oldKeys, currentKeys] = [await jwks(old), await jwks(current)];
    expect(oldKeys.keys.map((k) => k.kid).sort()).toEqual(currentKeys.keys.map((k) => k.kid).sort());
    const lifetimes = [];
    for (const [issued, keys] of [[fromOld, currentKeys], [fromCurrent, oldKeys]] as const) {
      const jwt = issued.body.access_token as string;
      const { payload } = await jwtVerify(jwt, createLocalJWKSet(keys), { issuer: ISSUER, audience: platform.platform_id, algorithms: ['RS256'] });
      expect(payload.sub).toBe(agent.agent_id);
      expect(decodeProtectedHeader(jwt).alg).toBe('RS256');
      lifetimes.push(payload.exp! - payload.iat!);
    }
    expect(lifetimes[0]).toBe(lifetimes[1]);
    expect(lifetimes[0]).toBeLessThanOrEqual(900);
  });

  it('one rate limit per key across both: alternating between them, the limit is spent once', async () => {
    const agent = await newAgent('limited');
    const statuses: number[] = [];
    for (let i = 0; i < TOKEN_LIMIT * 2; i++) statuses.push((await token(i % 2 === 0 ? old : current, agent)).status);
    expect(statuses.filter((s) => s === 200), statuses.join(' ')).toHaveLength(TOKEN_LIMIT);
    expect(statuses.slice(TOKEN_LIMIT), statuses.join(' ')).toEqual(Array(TOKEN_LIMIT).fill(429));
  });

  it('a deactivation through either one is refused by both, at once', async () => {
    for (const [via, name] of [[admin.current, 'new'], [admin.old, 'old']] as const) {
      const agent = await newAgent(`deactivated-via-${name}`);
      expect((await token(old, agent)).status).toBe(200); // warm on both: the cached views must be dropped
      expect((await token(current, agent)).status).toBe(200);
      await via.patchAgent(agent.agent_id, { status: 'inactive' });
      for (const service of [old, current]) {
        let last = 0;
        await waitFor(`${name} deactivation refused by ${service === old ? 'old' : 'new'}`, async () => (last = (await token(service, agent)).status) !== 200, 5000, 50);
        expect([401, 403], String(last)).toContain(last);
      }
    }
  });

  it('the revocation feed: both refuse it without a feed token; a feed token made through either serves the same events on both', async () => {
    for (const service of [old, current]) expect((await feed(service)).status, `${service === old ? 'old' : 'new'} without a feed token`).toBe(401);
    for (const [via, name] of [[admin.current, 'new'], [admin.old, 'old']] as const) {
      const feedToken = await via.feedToken(platform.platform_id);
      const answers = [];
      for (const service of [old, current]) {
        const response = await feed(service, feedToken);
        expect(response.status, `feed token made by ${name}, polled on ${service === old ? 'old' : 'new'}`).toBe(200);
        answers.push(Object.keys(((await response.json()) as { sets: Record<string, string> }).sets).sort());
      }
      expect(answers[0]!.length, 'the deactivations above are in the feed').toBeGreaterThanOrEqual(2);
      expect(answers[0]).toEqual(answers[1]);
      for (const service of [old, current]) expect((await feed(service, `${feedToken}x`)).status).toBe(401);
    }
  });
  // Last: it stops the old release. The old release cannot read agents without secrets (it would answer
  // 401 invalid_client for one that exists), so this build refuses to create them while it is live.
  it('agents without secrets wait for the rollout: 409 with a clear message while the old release is connected, 201 once it stopped', async () => {
    const { publicKey } = await generateKeyPair('ES256', { extractable: true });
    const body = { name: 'key-agent', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256' }] } };
    const create = () =>
      fetch(`${current.adminUrl}/admin/v1/agents`, {
        method: 'POST',
        headers: { authorization: `Bearer ${current.adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const refused = await create();
    expect(refused.status).toBe(409);
    const error = (await refused.json()) as { error_code: string; detail: string };
    expect(error.error_code).toBe('conflict');
    expect(error.detail).toMatch(/older release.*finish the rollout/);
    // Agents with secrets, which the old release reads, are not held back.
    expect((await newAgent('with-secret')).agent_id).toEqual(expect.any(String));

    await old.stop();
    let status = 0;
    await waitFor('a key agent created once the old release is gone', async () => (status = (await create()).status) === 201, 15_000, 200);
    expect(status).toBe(201);
  });
});
