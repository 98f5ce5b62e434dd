// Key agents (private_key_jwt) and a Redis that is stopped or loses its data: two instances share Postgres
// and a private redis-server (never the shared one). Tokens are served while Redis is down, and a used
// assertion stays used: Postgres is the durable record of used jtis (used-jtis.ts, replay-record.ts). On the
// embedded default (PGlite, no Redis) the record is PGlite's, and survives a restart on the same DATA_DIR.
import { webcrypto } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
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

async function assertion(signer = agent): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ jti: randomUUID() })
    .setProtectedHeader({ alg: 'ES256', kid: signer.kid })
    .setIssuer(signer.apiKeyId)
    .setSubject(signer.apiKeyId)
    .setAudience(ISSUER)
    .setIssuedAt(now)
    .setExpirationTime(now + 60)
    .sign(signer.privateKey);
}

async function token(service: ServiceHandle, jwt: string, platform = shop): Promise<number> {
  const response = await fetch(`${service.publicUrl}/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: jwt, audience: platform.platform_id }).toString(),
  });
  await response.arrayBuffer();
  return response.status;
}

async function keyAgent(admin: AdminClient, platform: PlatformRecord): Promise<typeof agent> {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const kid = 'k1';
  const created = await admin.call('POST', '/admin/v1/agents', { name: 'keyed', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [{ ...(await exportJWK(publicKey)), kid, alg: 'ES256' }] } }, 201);
  await admin.grant(created.agent_id, platform.platform_id, ['read']);
  return { apiKeyId: created.api_key_id, privateKey, kid };
}

beforeAll(async () => {
  redis = await startRedisServer();
  database = await createDatabase();
  const redisKeyPrefix = `ace-test-${randomBytes(4).toString('hex')}:`;
  const env = { ISSUER, REDIS_URL: redis.url, RATE_LIMIT_AUTH_FAIL_POINTS: '1000' };
  [a, b] = await Promise.all([startService({ mode: 'real', database, redisKeyPrefix, env }), startService({ mode: 'real', database, redisKeyPrefix, env })]);
  const admin = new AdminClient(a);
  shop = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'read' }] });
  agent = await keyAgent(admin, shop);
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

describe('key agents on the embedded default (PGlite, no Redis)', { timeout: 90_000 }, () => {
  let dataDir: string;
  let embedded: ServiceHandle | undefined;
  afterAll(async () => {
    await embedded?.stop('SIGKILL');
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('a used assertion stays refused after the process restarts on the same DATA_DIR', async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'ace-keyagent-'));
    embedded = await startService({ mode: 'embedded', dataDir, env: { ISSUER } });
    const admin = new AdminClient(embedded);
    const platform = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'read' }] });
    const signer = await keyAgent(admin, platform);
    const jwt = await assertion(signer);
    expect(await token(embedded, jwt, platform)).toBe(200);
    expect(await token(embedded, jwt, platform)).toBe(401);
    expect((await embedded.stop('SIGTERM')).code).toBe(0);
    embedded = await startService({ mode: 'embedded', dataDir, env: { ISSUER } });
    expect(await token(embedded, jwt, platform)).toBe(401);
    expect(await token(embedded, await assertion(signer), platform)).toBe(200);
  });
});
