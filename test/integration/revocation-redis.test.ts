// Revocation survives a Redis restart: two instances share a private redis-server; while it is down an
// admin change on one instance still reaches the other's subscribers (each instance compares its feeds'
// heads with Postgres every REVOCATION_POLL_MS), and after it returns pushes flow again.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, startService, type ServiceHandle, type TestDatabase } from '../support/service.js';
import { AdminClient, type PlatformRecord } from '../../kit/admin.js';
import { startRedisServer, type RedisServer } from '../support/faults.js';
import { call, msUntilRefused, startPlatform, token, type Platform } from '../support/revocation.js';

const ISSUER = 'https://ace.test';
let redis: RedisServer;
let database: TestDatabase;
let a: ServiceHandle;
let b: ServiceHandle;
let admin: AdminClient;
let shop: PlatformRecord;
let platform: Platform;

beforeAll(async () => {
  redis = await startRedisServer();
  database = await createDatabase();
  const redisKeyPrefix = `ace-test-${randomBytes(4).toString('hex')}:`;
  const env = { ISSUER, REDIS_URL: redis.url };
  a = await startService({ mode: 'real', database, redisKeyPrefix, env });
  b = await startService({ mode: 'real', database, redisKeyPrefix, env });
  admin = new AdminClient(a);
  shop = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'read' }] });
  platform = await startPlatform({ serviceUrl: b.publicUrl, platformId: shop.platform_id, issuer: ISSUER, feedToken: await admin.feedToken(shop.platform_id) });
}, 90_000);

afterAll(async () => {
  await platform?.close();
  await a?.stop('SIGKILL');
  await b?.stop('SIGKILL');
  await database?.drop();
  await redis?.kill();
});

async function revokedAgentToken(name: string): Promise<string> {
  const agent = await admin.createAgent(name);
  await admin.grant(agent.agent_id, shop.platform_id, ['read']);
  const t = await token(a.publicUrl, agent.api_key_id, agent.secret, shop.platform_id);
  expect((await call(platform.url, t)).status).toBe(200);
  await admin.patchAgent(agent.agent_id, { status: 'inactive' });
  return t;
}

describe('revocation and a Redis restart', () => {
  it('reaches the other instance while Redis is down and after it is back', async () => {
    const before = await revokedAgentToken('before');
    expect(await msUntilRefused(platform.url, before, Date.now())).toBeLessThan(5000);

    await redis.kill();
    const during = await revokedAgentToken('during');
    expect(await msUntilRefused(platform.url, during, Date.now())).toBeLessThan(5000);

    await redis.start();
    const after = await revokedAgentToken('after');
    expect(await msUntilRefused(platform.url, after, Date.now())).toBeLessThan(5000);
    expect(platform.verifier.revocationStats()).toMatchObject({ connected: true, stale: false });
  }, 60_000);
});
