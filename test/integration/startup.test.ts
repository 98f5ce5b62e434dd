// Start-up: configuration validation, generated admin token and key-encryption key, the embedded
// default's persistence, Redis really caching (and never holding secrets), and graceful shutdown.
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { AdminClient, postJson } from '../../kit/admin.js';
import { REDIS_URL, runToExit, startService, type ServiceHandle } from '../support/service.js';
import { freePort } from '../../kit/ports.js';
import { REPO_ROOT } from '../../kit/service.js';
import { spawn } from 'node:child_process';
import { once } from 'node:events';

const made: string[] = [];
const tmp = () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ace-startup-'));
  made.push(dir);
  return dir;
};
afterAll(() => made.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

describe('configuration', () => {
  it('refuses to start on bad settings, naming every bad variable and never echoing a URL', async () => {
    const { code, output } = await runToExit({
      PORT: 'eighty',
      ADMIN_PORT: '70000',
      API_KEY_PREFIX: 'BAD_kid_',
      TOKEN_TTL_SECONDS: '-5',
      WORKERS: '2',
      DATABASE_URL: 'mysql://admin:hunter2@db/x',
      KEY_ENCRYPTION_KEY: 'abc',
      LOG_LEVEL: 'loud',
      DATA_DIR: tmp(),
    });
    expect(code).toBe(78);
    for (const name of ['PORT', 'ADMIN_PORT', 'API_KEY_PREFIX', 'TOKEN_TTL_SECONDS', 'WORKERS', 'DATABASE_URL', 'KEY_ENCRYPTION_KEY', 'LOG_LEVEL']) {
      expect(output).toContain(name);
    }
    expect(output).not.toContain('hunter2');
  });

  it('refuses to start when uWebSockets.js is not the native binary (a pure-JS fallback)', async () => {
    const hook = pathToFileURL(path.resolve('test/fixtures/uws-js-fallback.mjs')).href;
    const { code, output } = await runToExit({ NODE_OPTIONS: `--import=${hook}`, PORT: String(await freePort()), DATA_DIR: tmp() });
    expect(code).toBe(1);
    expect(output).toMatch(/native binary did not load.*refusing to start/);
  });

  it('refuses the same port for the public and internal listeners', async () => {
    const port = String(await freePort());
    const { code, output } = await runToExit({ PORT: port, ADMIN_PORT: port, DATA_DIR: tmp() });
    expect(code).toBe(78);
    expect(output).toMatch(/PORT and ADMIN_PORT must differ/);
  });

  // uSockets listens with SO_REUSEPORT: without an exclusive listen, a second server of the same user on the
  // port silently shares its connections (a test once had its JWKS answered 404 by another service).
  it('refuses a port another uWS server (SO_REUSEPORT) holds, naming the setting, in one process and in a cluster', async () => {
    const taken = await freePort();
    const other = spawn(process.execPath, ['--input-type=module', '-e', `
      import * as uWS from 'uWebSockets.js';
      uWS.App().any('/*', (res) => res.end('someone else')).listen('127.0.0.1', ${taken}, (s) => console.log(s ? 'listening' : 'failed'));
    `], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const [line] = await once(other.stdout!, 'data');
      expect(String(line)).toContain('listening');
      for (const workers of ['1', '2']) {
        const { code, output } = await runToExit({ HOST: '127.0.0.1', PORT: String(taken), ADMIN_HOST: '127.0.0.1', ADMIN_PORT: String(await freePort()), DATA_DIR: tmp(), WORKERS: workers, ADMIN_TOKEN: 'x'.repeat(32),
          // A cluster needs an external database; this one does not exist (the port check comes first).
          DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/ace_never_created', REDIS_URL: 'redis://127.0.0.1:6379' });
        expect(code, output).toBe(1);
        expect(output).toContain(`HOST/PORT 127.0.0.1:${taken}: in use by another process`);
      }
      // The other server kept its port to itself: every connection still reaches it.
      for (let i = 0; i < 5; i++) expect(await (await fetch(`http://127.0.0.1:${taken}/.well-known/jwks.json`)).text()).toBe('someone else');
    } finally {
      other.kill('SIGKILL');
    }
  });
});

describe('embedded default without ADMIN_TOKEN or KEY_ENCRYPTION_KEY', () => {
  let service: ServiceHandle | undefined;
  afterAll(async () => {
    await service?.stop('SIGKILL');
  });

  it('generates both into DATA_DIR (mode 0600), logs the path but never the token, and keeps data across restarts', async () => {
    const dataDir = tmp();
    service = await startService({ mode: 'embedded', dataDir, env: { ADMIN_TOKEN: '', KEY_ENCRYPTION_KEY: '' } });
    const tokenFile = path.join(dataDir, 'admin-token');
    const kekFile = path.join(dataDir, 'key-encryption-key');
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
    expect(statSync(kekFile).mode & 0o777).toBe(0o600);
    const adminToken = readFileSync(tokenFile, 'utf8').trim();
    expect(adminToken.length).toBeGreaterThanOrEqual(32);
    expect(service.output()).toContain(tokenFile);
    expect(service.output()).not.toContain(adminToken);
    expect(service.output()).not.toContain(readFileSync(kekFile, 'utf8').trim());

    const admin = new AdminClient({ adminUrl: service.adminUrl, adminToken });
    const { platform, agent } = await admin.seed();
    const kids = ((await (await fetch(`${service.publicUrl}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] }).keys.map((k) => k.kid);

    // Graceful stop, then the same DATA_DIR: same admin token, same keys, same agents.
    const exit = await service.stop('SIGTERM');
    expect(exit.code).toBe(0);
    service = await startService({ mode: 'embedded', dataDir, env: { ADMIN_TOKEN: '', KEY_ENCRYPTION_KEY: '' } });
    expect(readFileSync(tokenFile, 'utf8').trim()).toBe(adminToken);
    const again = ((await (await fetch(`${service.publicUrl}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] }).keys.map((k) => k.kid);
    expect(again).toEqual(kids);
    const issued = await postJson(`${service.publicUrl}/api/v1/auth/token`, {
      api_key_id: agent.api_key_id,
      secret: agent.secret,
      platform_id: platform.platform_id,
    });
    expect(issued.status).toBe(200);
  });
});

describe('Redis cache (real mode)', () => {
  let service: ServiceHandle | undefined;
  afterAll(async () => {
    await service?.dispose();
  });

  it('caches agent views and platforms in Redis under the prefix, never a secret or a hash', async () => {
    service = await startService({ mode: 'real' });
    const admin = new AdminClient(service);
    const { platform, agent } = await admin.seed();
    const issued = await postJson(`${service.publicUrl}/api/v1/auth/token`, {
      api_key_id: agent.api_key_id,
      secret: agent.secret,
      platform_id: platform.platform_id,
    });
    expect(issued.status).toBe(200);
    await postJson(`${service.publicUrl}/api/v1/auth/agents/me/platforms`, { api_key_id: agent.api_key_id, secret: agent.secret });
    const redis = new Redis(REDIS_URL);
    try {
      const prefix = service.env.REDIS_KEY_PREFIX;
      const keys = await redis.keys(`${prefix}*`);
      expect(keys).toContain(`${prefix}c:agent:${agent.api_key_id}`);
      expect(keys).toContain(`${prefix}c:platform:${platform.platform_id}`);
      for (const key of keys) {
        const type = await redis.type(key);
        const value = type === 'string' ? await redis.get(key) : JSON.stringify(await redis.hgetall(key).catch(() => ({})));
        expect(value).not.toContain(agent.secret);
        expect(value).not.toContain('$argon2');
      }
      // An admin write drops the cached view at once.
      await admin.patchAgent(agent.agent_id, { status: 'inactive' });
      expect(await redis.exists(`${prefix}c:agent:${agent.api_key_id}`)).toBe(0);
    } finally {
      redis.disconnect();
    }
  });
});
