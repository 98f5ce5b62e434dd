// Key agents (private_key_jwt) and a Redis that is stopped or loses its data: two instances share Postgres
// and a private redis-server (never the shared one). Tokens are served while Redis is down, and a used
// assertion stays used: Postgres is the durable record of used jtis (used-jtis.ts, replay-record.ts).
import { webcrypto } from 'node:crypto';
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { AdminClient, type PlatformRecord } from '../../kit/admin.js';
import { createDatabase, startService, type ServiceHandle, type TestDatabase } from '../support/service.js';
import { startRedisServer, type RedisServer } from '../support/faults.js';

const ISSUER = 'https://ace.test.example';
let redis: RedisServer;
let database: TestDatabase;
let a: ServiceHandle;
let b: ServiceHandle;
let shop: PlatformRecord;
let agent: { apiKeyId: string; privateKey: webcrypto.CryptoKey; kid: string };

async function assertion(): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ jti: randomUUID() })
    .setProtectedHeader({ alg: 'ES256', kid: agent.kid })
    .setIssuer(agent.apiKeyId)
    .setSubject(agent.apiKeyId)
    .setAudience(ISSUER)
    .setIssuedAt(now)
    .setExpirationTime(now + 60)
    .sign(agent.privateKey);
}

async function token(service: ServiceHandle, jwt: string): Promise<number> {
  const response = await fetch(`${service.publicUrl}/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: jwt, audience: shop.platform_id }).toString(),
  });
  await response.arrayBuffer();
  return response.status;
}

beforeAll(async () => {
  redis = await startRedisServer();
  database = await createDatabase();
  const redisKeyPrefix = `ace-test-${randomBytes(4).toString('hex')}:`;
  const env = { ISSUER, REDIS_URL: redis.url, RATE_LIMIT_AUTH_FAIL_POINTS: '1000' };
  [a, b] = await Promise.all([startService({ mode: 'real', database, redisKeyPrefix, env }), startService({ mode: 'real', database, redisKeyPrefix, env })]);
  const admin = new AdminClient(a);
  shop = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'read' }] });
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const kid = 'k1';
  const created = await admin.call('POST', '/admin/v1/agents', { name: 'keyed', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [{ ...(await exportJWK(publicKey)), kid, alg: 'ES256' }] } }, 201);
  await admin.grant(created.agent_id, shop.platform_id, ['read']);
  agent = { apiKeyId: created.api_key_id, privateKey, kid };
}, 90_000);

afterAll(async () => {
  await a?.stop('SIGKILL');
  await b?.stop('SIGKILL');
  await database?.drop();
  await redis?.kill();
});

describe('key agents and Redis losing its data or stopping', { timeout: 60_000 }, () => {
  it('a used assertion stays refused after Redis is flushed, at the same and at the other instance', async () => {
    const jwt = await assertion();
    expect(await token(a, jwt)).toBe(200);
    await redis.client().flushall();
    expect(await token(a, jwt)).toBe(401);
    expect(await token(b, jwt)).toBe(401);
  });

  it('while Redis is stopped, key agents are served and a replay is still refused (also at the other instance)', async () => {
    await redis.kill();
    for (let i = 0; i < 10; i++) expect(await token(i % 2 ? a : b, await assertion())).toBe(200);
    const jwt = await assertion();
    expect(await token(a, jwt)).toBe(200);
    expect(await token(a, jwt)).toBe(401);
    expect(await token(b, jwt)).toBe(401);
    await redis.start();
  });
});
