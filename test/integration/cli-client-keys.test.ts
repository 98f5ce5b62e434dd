// `ace` for agents without secrets, run as a child process against a real service (embedded default): an
// agent created with a PEM public key, keys added (JWK) and removed, a workload issuer and a binding; the key
// agent then gets a token with an assertion its private key signs. A private key file is refused before
// anything is sent.
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignJWT, calculateJwkThumbprint, type JWK } from 'jose';
import { AdminClient } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { CLI, runAce } from '../support/ace.js';

const ISSUER = 'https://ace.cli.example';

const ace = runAce;

let service: ServiceHandle;
let env: Record<string, string>;
let dir: string;

beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" first`);
  service = await startService({ mode: 'embedded', env: { ISSUER } });
  env = { ACE_ADMIN_URL: service.adminUrl, ACE_PUBLIC_URL: service.publicUrl, ACE_ADMIN_TOKEN: service.adminToken };
  dir = mkdtempSync(path.join(os.tmpdir(), 'ace-cli-keys-'));
}, 90_000);

afterAll(async () => {
  await service?.dispose();
});

async function json(args: string[]) {
  const run = await ace([...args, '--json'], env);
  expect(run.code, `ace ${args.join(' ')}\n${run.stderr}`).toBe(0);
  return JSON.parse(run.stdout);
}

describe('ace: agents without secrets', () => {
  it('creates a key agent from a PEM public key, rotates its keys, and the agent gets a token with its key', async () => {
    // A key whose RFC 7638 thumbprint (its kid) begins with '-', as one key in 64 does: removing it takes
    // `--` before the kid, like any argument that reads as an option.
    let first = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    while (!(await calculateJwkThumbprint(first.publicKey.export({ format: 'jwk' }) as JWK)).startsWith('-')) first = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const second = generateKeyPairSync('ed25519');
    const pem = path.join(dir, 'agent.pub.pem');
    writeFileSync(pem, first.publicKey.export({ format: 'pem', type: 'spki' }));
    const jwkFile = path.join(dir, 'next.jwk');
    writeFileSync(jwkFile, JSON.stringify({ ...second.publicKey.export({ format: 'jwk' }), kid: 'next' }));

    const agent = await json(['agent', 'create', 'cli-key-agent', '--key', pem]);
    expect(agent.secret).toBeUndefined();
    expect(agent.token_endpoint_auth_method).toBe('private_key_jwt');
    const listed = await json(['agent', 'keys', agent.agent_id]);
    expect(listed.jwks.keys).toHaveLength(1);
    const firstKid = listed.jwks.keys[0].kid as string;
    expect(firstKid).toBe(await calculateJwkThumbprint(first.publicKey.export({ format: 'jwk' }) as JWK)); // the RFC 7638 thumbprint

    expect((await json(['agent', 'add-key', agent.agent_id, jwkFile])).jwks.keys.map((k: { kid: string }) => k.kid)).toEqual([firstKid, 'next']);
    const human = await ace(['agent', 'keys', agent.agent_id], env);
    expect(human.stdout).toMatch(/KID\s+KTY/);
    expect(human.stdout).toContain('next');

    const admin = new AdminClient(service);
    const platform = await admin.createPlatform({ name: 'CliShop', scopes: [{ name: 'read' }] });
    await admin.grant(agent.agent_id, platform.platform_id, ['read']);
    const assertion = (key: typeof first.privateKey, kid: string, alg: string) =>
      new SignJWT({ jti: randomUUID() }).setProtectedHeader({ alg, kid }).setIssuer(agent.api_key_id).setSubject(agent.api_key_id).setAudience(ISSUER).setIssuedAt().setExpirationTime('1m').sign(key);
    const exchange = async (jwt: string) =>
      (
        await fetch(`${service.publicUrl}/oauth2/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ grant_type: 'client_credentials', client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: jwt, audience: platform.platform_id }),
        })
      ).status;
    expect(await exchange(await assertion(first.privateKey, firstKid, 'ES256'))).toBe(200);

    const withoutDashes = await ace(['agent', 'remove-key', agent.agent_id, firstKid], env);
    expect(withoutDashes.code).toBe(2); // a usage error, nothing sent
    expect(withoutDashes.stderr).toContain("after '--'");
    expect(await exchange(await assertion(first.privateKey, firstKid, 'ES256'))).toBe(200);
    const removed = await ace(['agent', 'remove-key', agent.agent_id, '--', firstKid], env);
    expect(removed.code, removed.stderr).toBe(0);
    expect(await exchange(await assertion(first.privateKey, firstKid, 'ES256'))).toBe(401);
    expect(await exchange(await assertion(second.privateKey, 'next', 'EdDSA'))).toBe(200);
  });

  it('refuses a private key file without sending it', async () => {
    const file = path.join(dir, 'private.pem');
    writeFileSync(file, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }));
    const run = await ace(['agent', 'create', 'leaky', '--key', file], env);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/private key/);
    const agents = await json(['agent', 'list']);
    expect(agents.agents.some((a: { name: string }) => a.name === 'leaky')).toBe(false);
  });

  it('registers a workload issuer and binds a subject to an agent', async () => {
    const issuerKey = path.join(dir, 'issuer.jwks');
    writeFileSync(issuerKey, JSON.stringify({ keys: [{ ...generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' }), kid: 'k8s-1' }] }));
    const issuer = await json(['issuer', 'add', '--issuer', 'https://kubernetes.default.svc.cluster.local', '--audience', ISSUER, '--key', issuerKey]);
    const agent = await json(['agent', 'create', 'cli-workload', '--no-secret']);
    expect(agent.secret).toBeUndefined();
    expect((await json(['agent', 'keys', agent.agent_id])).jwks.keys).toEqual([]);
    const binding = await json(['binding', 'add', issuer.issuer_id, 'system:serviceaccount:jobs:nightly', agent.agent_id]);
    expect(binding).toMatchObject({ subject: 'system:serviceaccount:jobs:nightly', agent_id: agent.agent_id });
    expect((await json(['binding', 'list', issuer.issuer_id])).bindings).toHaveLength(1);
    expect((await json(['issuer', 'list'])).workload_issuers.map((i: { issuer_id: string }) => i.issuer_id)).toContain(issuer.issuer_id);
    expect((await ace(['binding', 'remove', issuer.issuer_id, 'system:serviceaccount:jobs:nightly'], env)).code).toBe(0);
    expect((await json(['binding', 'list', issuer.issuer_id])).bindings).toHaveLength(0);
    expect((await ace(['issuer', 'remove', issuer.issuer_id], env)).code).toBe(0);
  });
});
