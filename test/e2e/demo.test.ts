// `npm run demo` (scripts/demo.mjs), as the README's tour runs it: against a live service, configured with
// the same environment names as `ace` and examples/ (ACE_PUBLIC_URL, ACE_ADMIN_URL, ACE_ADMIN_TOKEN, else
// the token file in DATA_DIR). It creates a platform, an agent and a grant, and the token it gets verifies
// against the JWKS with that platform as `aud`. The older names are refused before anything is created.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type ServiceHandle } from '../support/service.js';

const DEMO = path.resolve(import.meta.dirname, '../..', 'scripts', 'demo.mjs');
let service: ServiceHandle;
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ace-demo-'));

function demo(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  // Only PATH from this process: no ACE_* or DATA_DIR of the developer's shell leaks into the run.
  const child = spawn(process.execPath, [DEMO], { cwd: dataDir, env: { PATH: process.env.PATH ?? '', ...env } });
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, output })));
}

async function platformNames(): Promise<string[]> {
  const response = await fetch(`${service.adminUrl}/admin/v1/platforms`, { headers: { authorization: `Bearer ${service.adminToken}` } });
  expect(response.status).toBe(200);
  const body = (await response.json()) as { platforms: { name: string }[] };
  return body.platforms.map((p) => p.name);
}

beforeAll(async () => {
  service = await startService({ mode: 'real' });
});
afterAll(async () => {
  await service?.dispose();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('npm run demo', () => {
  it('refuses the older names SERVICE_URL / ADMIN_URL, naming the new ones, and creates nothing', async () => {
    const run = await demo({ SERVICE_URL: service.publicUrl, ADMIN_URL: service.adminUrl, ACE_ADMIN_TOKEN: service.adminToken });
    expect(run.code).not.toBe(0);
    expect(run.output).toContain('SERVICE_URL is no longer read: set ACE_PUBLIC_URL');
    expect(await platformNames()).not.toContain('Demo Shop');
  });

  it('says where the admin token is looked for when neither ACE_ADMIN_TOKEN nor the file is there', async () => {
    const run = await demo({ ACE_PUBLIC_URL: service.publicUrl, ACE_ADMIN_URL: service.adminUrl, DATA_DIR: path.join(dataDir, 'missing') });
    expect(run.code).not.toBe(0);
    expect(run.output).toContain('no admin token: set ACE_ADMIN_TOKEN');
  });

  it.each([
    ['ACE_ADMIN_TOKEN', () => ({ ACE_ADMIN_TOKEN: service.adminToken })],
    ['the token file in DATA_DIR', () => (writeFileSync(path.join(dataDir, 'admin-token'), `${service.adminToken}\n`), { DATA_DIR: dataDir })],
  ])('with ACE_PUBLIC_URL, ACE_ADMIN_URL and %s: a platform, an agent, a token for that platform', async (_name, token) => {
    const run = await demo({ ACE_PUBLIC_URL: service.publicUrl, ACE_ADMIN_URL: service.adminUrl, ...token() });
    expect(run.code, run.output).toBe(0);
    const platformId = /^platform (\S+)$/m.exec(run.output)?.[1];
    expect(platformId).toMatch(/^[0-9a-f-]{36}$/);
    // The payload the demo printed after jwtVerify against the JWKS: its audience is the platform it made.
    const payload = JSON.parse(/^token +\{.*?\} (\{.*\})$/m.exec(run.output)![1]!) as { aud: string; scope: string };
    expect(payload.aud).toBe(platformId);
    expect(payload.scope).toBe('orders:read');
    expect(run.output).toContain(`platform_id: "${platformId}"`);
    expect(await platformNames()).toContain('Demo Shop');
  });
});
