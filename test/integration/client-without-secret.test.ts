// The agent client without a secret, against a real service (embedded default) and a platform behind the
// middleware: a private key (file, PEM string, JWK) signs a fresh assertion for each token request; a
// workload token file is read again at each request (Kubernetes rotates it in place). Bad set-ups fail at
// start, not at the first request.
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignJWT } from 'jose';
import { AgentClient } from '../../packages/client/src/index.js';
import { AdminClient, type PlatformRecord } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { startPlatform, type Platform } from '../support/revocation.js';

const ISSUER = 'http://ace.client.test';
let service: ServiceHandle;
let admin: AdminClient;
let shop: PlatformRecord;
let platform: Platform;
let dir: string;

beforeAll(async () => {
  service = await startService({ mode: 'embedded', env: { ISSUER } });
  admin = new AdminClient(service);
  shop = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'read' }, { name: 'write' }] });
  platform = await startPlatform({ serviceUrl: service.publicUrl, platformId: shop.platform_id, issuer: ISSUER, feedToken: await admin.feedToken(shop.platform_id) });
  dir = mkdtempSync(path.join(os.tmpdir(), 'ace-client-keys-'));
}, 90_000);

afterAll(async () => {
  await platform?.close();
  await service?.dispose();
});

const subOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { sub: string; scope: string };

describe('AgentClient without a secret', () => {
  it('signs private_key_jwt assertions with a key file (kid: the thumbprint the CLI registers) and calls the platform', async () => {
    const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    // Registered the way `ace agent create --key public.pem` does: no kid given, so the thumbprint.
    const jwk = publicKey.export({ format: 'jwk' });
    const { calculateJwkThumbprint } = await import('jose');
    const created = await admin.call('POST', '/admin/v1/agents', { name: 'keyed', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [{ ...jwk, kid: await calculateJwkThumbprint(jwk as never) }] } }, 201);
    await admin.grant(created.agent_id, shop.platform_id, ['read', 'write']);
    const keyFile = path.join(dir, 'agent.pem');
    writeFileSync(keyFile, privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600 });

    const client = await AgentClient.start({
      serviceUrl: service.publicUrl,
      apiKeyId: created.api_key_id,
      privateKeyFile: keyFile,
      platforms: { [platform.url]: shop.platform_id },
      scopes: { [shop.platform_id]: ['read'] },
    });
    const response = await client.fetch(`${platform.url}/orders`);
    expect(response.status).toBe(200);
    const token = await client.token(shop.platform_id);
    expect(subOf(token)).toMatchObject({ sub: created.agent_id, scope: 'read' });
  });

  it('takes a JWK private key with an explicit kid and algorithm (PS256)', async () => {
    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const created = await admin.call('POST', '/admin/v1/agents', { name: 'ps256', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [{ ...publicKey.export({ format: 'jwk' }), kid: 'k1', alg: 'PS256' }] } }, 201);
    await admin.grant(created.agent_id, shop.platform_id, ['read']);
    const client = await AgentClient.start({
      serviceUrl: service.publicUrl,
      apiKeyId: created.api_key_id,
      privateKey: privateKey.export({ format: 'jwk' }),
      keyId: 'k1',
      algorithm: 'PS256',
      platforms: { [platform.url]: shop.platform_id },
    });
    expect(subOf(await client.token(shop.platform_id)).sub).toBe(created.agent_id);
  });

  it("re-reads a workload token file at each request: a rotated token is the one presented", async () => {
    const issuerKey = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const iss = `https://k8s-${randomUUID().slice(0, 8)}.example`;
    const issuer = await admin.call('POST', '/admin/v1/workload-issuers', { issuer: iss, audience: ISSUER, jwks: { keys: [{ ...issuerKey.publicKey.export({ format: 'jwk' }), kid: 'sa-1' }] } }, 201);
    const agent = await admin.createAgent('workload');
    await admin.grant(agent.agent_id, shop.platform_id, ['read']);
    await admin.call('POST', `/admin/v1/workload-issuers/${issuer.issuer_id}/bindings`, { subject: 'system:serviceaccount:shop:worker', agent_id: agent.agent_id }, 201);
    const projected = (sub: string) =>
      new SignJWT({}).setProtectedHeader({ alg: 'ES256', kid: 'sa-1' }).setIssuer(iss).setSubject(sub).setAudience(ISSUER).setIssuedAt().setExpirationTime('1h').sign(issuerKey.privateKey);
    const tokenFile = path.join(dir, 'token');
    writeFileSync(tokenFile, await projected('system:serviceaccount:shop:worker'));

    const client = await AgentClient.start({ serviceUrl: service.publicUrl, workloadTokenFile: tokenFile, platforms: { [platform.url]: shop.platform_id }, maxWaitMs: 0 });
    expect(subOf(await client.token(shop.platform_id)).sub).toBe(agent.agent_id);
    expect((await client.fetch(`${platform.url}/orders`)).status).toBe(200);

    // The platform rotates the file to a token of an unbound account: the next request presents it (and is refused).
    writeFileSync(tokenFile, await projected('system:serviceaccount:shop:intruder'));
    const other = await AgentClient.start({ serviceUrl: service.publicUrl, workloadTokenFile: tokenFile, platforms: { [platform.url]: shop.platform_id }, maxWaitMs: 0 });
    await expect(other.token(shop.platform_id)).rejects.toMatchObject({ status: 401, code: 'invalid_client' });
  });

  it('refuses set-ups that cannot work, at start', async () => {
    await expect(AgentClient.start({ serviceUrl: service.publicUrl, apiKeyId: 'x' })).rejects.toThrow(/exactly one of/);
    await expect(AgentClient.start({ serviceUrl: service.publicUrl, apiKeyId: 'x', secret: 's', privateKeyFile: '/nonexistent' })).rejects.toThrow(/exactly one of/);
    await expect(AgentClient.start({ serviceUrl: service.publicUrl, privateKey: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey })).rejects.toThrow(/apiKeyId/);
  });
});
