// The verified-secret memory is shared and survives reconnects: a second instance started after the first
// verified N agents serves them with ~0 argon2 verifications (ace_credential_checks_total); a rotated
// secret and a deactivated agent are refused at every instance; a Redis restart (its data lost, every
// connection reset) keeps each instance's memory, re-checked against Postgres instead of argon2.
// Real Postgres, a private redis-server (killed and restarted here), two service processes.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson } from '../../kit/admin.js';
import { metricSum } from '../../kit/metrics.js';
import { waitFor } from '../../kit/wait.js';
import { createDatabase, startService, type ServiceHandle, type TestDatabase } from '../support/service.js';
import { startRedisServer, type RedisServer } from '../support/faults.js';

const AGENTS = 20;

describe('shared verified-secret memory', { timeout: 180_000 }, () => {
  let redis: RedisServer;
  let database: TestDatabase;
  const services: ServiceHandle[] = [];
  let first: ServiceHandle;
  let platformId: string;
  let agents: { agent_id: string; api_key_id: string; secret: string }[];
  const prefix = `ace-test-${randomBytes(4).toString('hex')}:`;

  const start = async () => {
    const service = await startService({
      mode: 'real',
      database,
      redisKeyPrefix: prefix,
      env: { REDIS_URL: redis.url, RATE_LIMIT_TOKEN_POINTS: '1000000', RATE_LIMIT_AUTH_FAIL_POINTS: '1000000' },
    });
    services.push(service);
    return service;
  };
  const metrics = async (service: ServiceHandle) => (await fetch(`${service.adminUrl}/metrics`)).text();
  const argon2Checks = async (service: ServiceHandle) => metricSum(await metrics(service), 'ace_credential_checks_total');
  const token = (service: ServiceHandle, agent: { api_key_id: string; secret: string }) =>
    postJson(`${service.publicUrl}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platformId });

  beforeAll(async () => {
    redis = await startRedisServer();
    await redis.start();
    database = await createDatabase();
    first = await start();
    const admin = new AdminClient(first);
    const platform = await admin.createPlatform({ name: 'Shop', domain: 'shop.example.com', scopes: [{ name: 'orders:read', description: 'read' }] });
    platformId = platform.platform_id;
    agents = [];
    for (let i = 0; i < AGENTS; i++) {
      const agent = await admin.createAgent(`agent-${i}`);
      await admin.grant(agent.agent_id, platformId, ['orders:read']);
      agents.push(agent);
    }
  });
  afterAll(async () => {
    for (const service of services) await service.dispose();
    await database?.drop();
    await redis?.kill();
  });

  it('a second instance serves agents the first verified with ~0 argon2 verifications', async () => {
    for (const agent of agents) expect((await token(first, agent)).status).toBe(200);
    expect(await argon2Checks(first)).toBeGreaterThanOrEqual(AGENTS);

    const second = await start();
    const before = await argon2Checks(second); // its start-up checks, if any
    for (const agent of agents) expect((await token(second, agent)).status).toBe(200);
    expect(await argon2Checks(second)).toBeLessThanOrEqual(before + AGENTS * 0.1);
    expect(metricSum(await metrics(second), 'ace_cache_requests_total', { cache: 'verified_shared', result: 'hit' })).toBeGreaterThanOrEqual(AGENTS * 0.9);
    // Warm now in process too: a second round asks neither argon2 nor the shared memory.
    for (const agent of agents) expect((await token(second, agent)).status).toBe(200);
    expect(await argon2Checks(second)).toBeLessThanOrEqual(before + AGENTS * 0.1);
  });

  it('a rotated secret and a deactivated agent are refused at every instance, even when a stale entry is written back', async () => {
    const [rotated, deactivated] = agents;
    const admin = new AdminClient(first);
    // What the shared memory holds for the agent before the rotation, written back after it (with its TTL:
    // nothing deletes the entries, they name the old hash): a verifier that read the old hash and wrote
    // its entry after the rotation (the crossing race).
    const client = redis.client();
    // One string key per verified (key id, secret, hash): `<prefix>v:{<api_key_id>}:<hmac>`.
    const keys = await client.keys(`${prefix}v:{${rotated.api_key_id}}:*`);
    expect(keys.length).toBeGreaterThan(0);
    const stale = await Promise.all(keys.map(async (key) => ({ key, value: (await client.get(key))!, ttl: await client.pttl(key) })));
    const fresh = await admin.rotateSecret(rotated.agent_id);
    await admin.patchAgent(deactivated.agent_id, { status: 'inactive' });
    // Each instance has dropped the agent from its own memory and serves the new secret ...
    for (const service of services) expect((await token(service, { api_key_id: rotated.api_key_id, secret: fresh.secret })).status).toBe(200);
    // ... and only then does the stale entry land.
    for (const entry of stale) await client.set(entry.key, entry.value, 'PX', entry.ttl);
    client.disconnect();
    for (const service of services) {
      const old = await token(service, rotated);
      expect(old.status).toBe(401);
      expect(old.body).toMatchObject({ error_code: 'invalid_credentials' });
      expect((await token(service, deactivated)).status).toBe(403);
    }
    // A secret that never verified is refused too (nothing in Redis can stand in for argon2).
    expect((await token(services[1], { api_key_id: agents[2].api_key_id, secret: randomBytes(32).toString('base64url') })).status).toBe(401);
  });

  it('a Redis restart keeps the memory: no argon2 for the agents already verified', async () => {
    const second = services[1];
    const redisUp = async (up: number) => metricSum(await metrics(second), 'ace_store_up', { store: 'redis' }) === up;
    const before = await argon2Checks(second);
    await redis.kill();
    await waitFor('Redis seen down', () => redisUp(0), 30_000);
    await redis.start(); // empty: the shared entries are gone with it
    await waitFor('Redis seen up again', () => redisUp(1), 30_000);
    await waitFor('the Redis cache in use again', async () => metricSum(await metrics(second), 'ace_redis_cache_trusted') === 1, 30_000);
    for (const agent of agents.slice(2)) expect((await token(second, agent)).status).toBe(200);
    expect(await argon2Checks(second)).toBeLessThanOrEqual(before + AGENTS * 0.1);
  });
});
