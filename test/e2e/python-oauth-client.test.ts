// From outside: a client this project did not write (Debian's python3-authlib,
// OAuth2Session client credentials, client_secret_basic and client_secret_post) gets a token that PyJWT
// (python3-jwt) accepts with every RFC 9068 claim required, typ at+jwt, the signature from the metadata's
// jwks_uri and iss equal to the metadata's issuer (examples/python-oauth-client/client.py).
import { spawn, spawnSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';

const CLIENT = 'examples/python-oauth-client/client.py';
// The python3 on PATH may be a pyenv one without Debian's packages: take the first that has them.
const python = ['python3', '/usr/bin/python3'].find(
  (bin) => spawnSync(bin, ['-c', 'import authlib, jwt, requests'], { stdio: 'ignore' }).status === 0,
);
if (!python) {
  const message = 'python-oauth-client: SKIPPED, no python3 with authlib, jwt and requests (apt-get install python3-authlib python3-jwt python3-requests)';
  // CI installs them (.ci/run): there a missing client is a failure, not a skip.
  if (process.env.CI === 'true') throw new Error(message);
  console.warn(`\n*** ${message} ***\n`);
}

function runClient(env: Record<string, string>): Promise<{ code: number | null; out: any; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(python!, [CLIENT], { env: { PATH: process.env.PATH ?? '', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      let out: any;
      try {
        out = JSON.parse(stdout.trim().split('\n').pop() ?? '');
      } catch {
        out = stdout;
      }
      resolve({ code, out, stderr });
    });
  });
}

describe.skipIf(!python)('python3-authlib + PyJWT against /oauth2/token', () => {
  let service: ServiceHandle;
  let base: Record<string, string>;
  let platformId: string;
  let agentId: string;
  let domain: string;
  const mcpUrl = `https://mcp-${crypto.randomUUID().slice(0, 8)}.example.com/mcp`;

  beforeAll(async () => {
    service = await startService({ mode: 'real' });
    const admin = new AdminClient(service);
    domain = `shop-${crypto.randomUUID().slice(0, 8)}.example.com`;
    const platform = await admin.createPlatform({
      name: 'Shop',
      domain,
      verification_status: 'verified',
      scopes: [{ name: 'orders:read' }, { name: 'orders:write' }],
      resources: [mcpUrl],
    });
    const agent = await admin.createAgent('python');
    await admin.grant(agent.agent_id, platform.platform_id, ['orders:read', 'orders:write']);
    platformId = platform.platform_id;
    agentId = agent.agent_id;
    base = { ACE_PUBLIC_URL: service.publicUrl, ACE_CLIENT_ID: agent.api_key_id, ACE_CLIENT_SECRET: agent.secret, ACE_PLATFORM_ID: platformId };
  });
  afterAll(async () => {
    await service?.dispose();
  });

  it('client_secret_basic, resource urn:uuid:<platform_id>: the token passes PyJWT with every RFC 9068 claim required', async () => {
    const { code, out, stderr } = await runClient({ ...base, ACE_AUTH_METHOD: 'client_secret_basic' });
    expect(code, `${JSON.stringify(out)} ${stderr}`).toBe(0);
    expect(out).toMatchObject({ token_type: 'Bearer', expires_in: 900, typ: 'at+jwt', scope: 'orders:read orders:write' });
    expect(out.claims).toMatchObject({ iss: service.publicUrl, aud: [`urn:uuid:${platformId}`, platformId], sub: agentId, client_id: base.ACE_CLIENT_ID, svc_token_profile: 'oauth-at-jwt' });
  });

  it('client_secret_post, resource https://<verified domain>, a scope subset', async () => {
    const { code, out, stderr } = await runClient({ ...base, ACE_AUTH_METHOD: 'client_secret_post', ACE_RESOURCE: `https://${domain}`, ACE_SCOPE: 'orders:read' });
    expect(code, `${JSON.stringify(out)} ${stderr}`).toBe(0);
    expect(out).toMatchObject({ typ: 'at+jwt', scope: 'orders:read' });
    expect(out.claims).toMatchObject({ aud: [`https://${domain}`, platformId], scope: 'orders:read' });
  });

  it('resource = an MCP server URL registered to the platform: the token passes PyJWT with that URL as the audience', async () => {
    const { code, out, stderr } = await runClient({ ...base, ACE_RESOURCE: mcpUrl });
    expect(code, `${JSON.stringify(out)} ${stderr}`).toBe(0);
    expect(out.claims).toMatchObject({ aud: [mcpUrl, platformId], sub: agentId });
  });

  it('a wrong secret is the OAuth error authlib knows: invalid_client', async () => {
    const { code, out } = await runClient({ ...base, ACE_CLIENT_SECRET: 'wrong-secret' });
    expect(code).toBe(2);
    expect(out.error).toBe('invalid_client');
  });

  // RFC 7523 private_key_jwt, signed by authlib's PrivateKeyJWT (aud: the metadata's token endpoint).
  for (const alg of ['RS256', 'ES256', 'PS256'] as const) {
    it(`private_key_jwt (${alg}), an agent without a secret: authlib gets a token PyJWT accepts`, async () => {
      const admin = new AdminClient(service);
      const { publicKey, privateKey } = alg === 'ES256' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('rsa', { modulusLength: 2048 });
      const jwk = { ...publicKey.export({ format: 'jwk' }), kid: `authlib-${alg}`, alg };
      const agent = await admin.call('POST', '/admin/v1/agents', { name: `authlib-${alg}`, token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [jwk] } }, 201);
      await admin.grant(agent.agent_id, platformId, ['orders:read']);
      const dir = mkdtempSync(path.join(os.tmpdir(), 'ace-pkjwt-'));
      const keyFile = path.join(dir, 'agent.pem');
      writeFileSync(keyFile, privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600 });
      try {
        const env = { ACE_PUBLIC_URL: service.publicUrl, ACE_CLIENT_ID: agent.api_key_id, ACE_PLATFORM_ID: platformId, ACE_AUTH_METHOD: 'private_key_jwt', ACE_PRIVATE_KEY_FILE: keyFile, ACE_ASSERTION_ALG: alg };
        const { code, out, stderr } = await runClient(env);
        expect(code, `${JSON.stringify(out)} ${stderr}`).toBe(0);
        expect(out.claims).toMatchObject({ sub: agent.agent_id, client_id: agent.api_key_id, scope: 'orders:read' });
        // A key the agent does not hold: invalid_client.
        writeFileSync(keyFile, generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'pem', type: 'pkcs8' }));
        const wrong = await runClient({ ...env, ACE_ASSERTION_ALG: 'RS256' });
        expect(wrong.code).toBe(2);
        expect(wrong.out.error).toBe('invalid_client');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
