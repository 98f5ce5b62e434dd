// The `ace` operator CLI, run as a child process (dist/src/cli/main.js) against a real service.
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postJson } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { freePort } from '../../kit/ports.js';
import { CLI, runAce } from '../support/ace.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `ace` with only the given environment (so a developer's ACE_* cannot leak in), in an empty cwd. */
function ace(args: string[], env: Record<string, string> = {}, cwd = mkdtempSync(path.join(os.tmpdir(), 'ace-cli-'))) {
  return runAce(args, env, cwd);
}

/** `ace ... --json`, expecting success; the parsed stdout. */
async function aceJson<T = any>(args: string[], env: Record<string, string>): Promise<T> {
  const run = await ace([...args, '--json'], env);
  expect(run.code, `ace ${args.join(' ')}\n${run.stderr}`).toBe(0);
  return JSON.parse(run.stdout) as T;
}

/** "key  value" lines of the human output as an object. */
function fieldsOf(stdout: string): Record<string, string> {
  return Object.fromEntries(
    stdout
      .split('\n')
      .map((line) => /^(\S+)\s+(.*)$/.exec(line))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => [m[1], m[2]]),
  );
}

function jwtPayload(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString('utf8'));
}

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" first`);
});

describe('ace without a service', () => {
  it('prints help with exit 0 for the CLI, a group and a command', async () => {
    const top = await ace(['--help']);
    expect(top.code).toBe(0);
    for (const command of ['platform create', 'platform scopes-file', 'agent rotate-secret', 'grant', 'revoke', 'keys retire']) {
      expect(top.stdout).toContain(command);
    }
    expect(top.stdout).toContain('--admin-url');

    const group = await ace(['platform', '--help']);
    expect(group.code).toBe(0);
    expect(group.stdout).toContain('platform scopes-file');
    expect(group.stdout).not.toContain('agent create');

    const command = await ace(['agent', 'rotate-secret', '--help']);
    expect(command.code).toBe(0);
    expect(command.stdout).toContain('--grace');

    const viaHelpWord = await ace(['help', 'platform', 'create']);
    expect(viaHelpWord.code).toBe(0);
    expect(viaHelpWord.stdout).toContain('--file');
  });

  it('exits 2 on usage errors, before contacting anything', async () => {
    const env = { ACE_ADMIN_TOKEN: 'unused', ACE_ADMIN_URL: `http://127.0.0.1:${await freePort()}` };
    const cases: string[][] = [
      [],
      ['frobnicate'],
      ['platform'],
      ['platform', 'frobnicate'],
      ['platform', 'create'],
      ['platform', 'show'],
      ['platform', 'list', '--bogus'],
      ['grant', 'agent-only', 'platform-only'],
      ['revoke', 'a', 'b', 'c'],
      ['agent', 'rotate-secret', 'some-agent', '--grace', 'soon'],
      ['platform', 'create', '--name', 'X', '--route', 'GET'],
      ['platform', 'create', '--file', '/nonexistent/platform.yaml'],
      ['platform', 'list', '--admin-url', 'not a url'],
    ];
    for (const args of cases) {
      const run = await ace(args, env);
      expect(run.code, `ace ${args.join(' ')}: ${run.stderr}`).toBe(2);
      expect(run.stderr).toMatch(/^ace: error: /);
      expect(run.stdout).toBe('');
    }
  });

  it('exits 2 when no admin token is configured, naming the token file it looked for', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ace-cli-data-'));
    const run = await ace(['agent', 'list'], { DATA_DIR: dataDir, ACE_ADMIN_URL: `http://127.0.0.1:${await freePort()}` });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(path.join(dataDir, 'admin-token'));
  });

  it('exits 3 when the admin or public API cannot be reached', async () => {
    const port = await freePort();
    const admin = await ace(['platform', 'list'], { ACE_ADMIN_URL: `http://127.0.0.1:${port}`, ACE_ADMIN_TOKEN: 'secret-admin-token' });
    expect(admin.code).toBe(3);
    expect(admin.stderr).toContain('cannot connect');
    expect(admin.stderr).toContain(`127.0.0.1:${port}`);
    expect(admin.stderr).not.toContain('secret-admin-token');

    const viaFlag = await ace(['keys', 'list', '--admin-url', `http://127.0.0.1:${port}`, '--token', 'x']);
    expect(viaFlag.code).toBe(3);

    const publicApi = await ace(['platform', 'scopes-file', randomUUID(), '--public-url', `http://127.0.0.1:${port}`]);
    expect(publicApi.code).toBe(3);
    expect(publicApi.stderr).toContain('public API');
  });
});

describe('ace against the service', () => {
  let service: ServiceHandle;
  let env: Record<string, string>;
  let work: string;

  const token = (api_key_id: string, secret: string, platform_id: string) =>
    postJson(`${service.publicUrl}/api/v1/auth/token`, { api_key_id, secret, platform_id });

  /** An admin change takes effect within one second (docs/admin-api.md): poll briefly for the expected status. */
  async function tokenStatus(expected: number, api_key_id: string, secret: string, platform_id: string) {
    const deadline = Date.now() + 3000;
    let answer = await token(api_key_id, secret, platform_id);
    while (answer.status !== expected && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      answer = await token(api_key_id, secret, platform_id);
    }
    expect(answer.status, answer.text).toBe(expected);
    return answer;
  }

  async function createPlatformFromYaml(): Promise<any> {
    const file = path.join(work, `platform-${randomUUID()}.yaml`);
    writeFileSync(
      file,
      [
        'name: CLI Shop',
        'domain: cli-shop.example.com',
        'scopes:',
        '  - name: orders:read',
        '    description: Read orders',
        '  - name: orders:write',
        '    description: Change orders',
        'routes:',
        '  - method: GET',
        '    path: /orders/{id}',
        '    scopes: [orders:read]',
        '',
      ].join('\n'),
    );
    return aceJson(['platform', 'create', '--file', file], env);
  }

  beforeAll(async () => {
    service = await startService({ mode: 'real', env: { KEY_PROPAGATION_SECONDS: '2' } });
    env = { ACE_ADMIN_URL: service.adminUrl, ACE_PUBLIC_URL: service.publicUrl, ACE_ADMIN_TOKEN: service.adminToken };
    work = mkdtempSync(path.join(os.tmpdir(), 'ace-cli-work-'));
  });

  afterAll(async () => {
    await service?.dispose();
  });

  it('creates a platform from a YAML file and shows and lists it', async () => {
    const platform = await createPlatformFromYaml();
    expect(platform.platform_id).toMatch(UUID);
    expect(platform.name).toBe('CLI Shop');
    expect(platform.domain).toBe('cli-shop.example.com');
    expect(platform.scopes).toEqual([
      { name: 'orders:read', description: 'Read orders' },
      { name: 'orders:write', description: 'Change orders' },
    ]);
    expect(platform.routes).toEqual([{ method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] }]);

    const shown = await ace(['platform', 'show', platform.platform_id], env);
    expect(shown.code).toBe(0);
    for (const text of [platform.platform_id, 'cli-shop.example.com', 'orders:write', 'Change orders', '/orders/{id}']) {
      expect(shown.stdout).toContain(text);
    }

    const listed = await ace(['platform', 'list'], env);
    expect(listed.code).toBe(0);
    expect(listed.stdout.split('\n')[0]).toMatch(/^PLATFORM_ID\s+NAME\s+DOMAIN/);
    expect(listed.stdout).toMatch(new RegExp(`${platform.platform_id}\\s+CLI Shop\\s+cli-shop\\.example\\.com`));

    const listedJson = await aceJson<{ platforms: { platform_id: string }[] }>(['platform', 'list'], env);
    expect(listedJson.platforms.map((p) => p.platform_id)).toContain(platform.platform_id);
  });

  it('creates a platform from flags, with descriptions and routes', async () => {
    const platform = await aceJson(
      [
        'platform', 'create',
        '--name', 'Flag Shop',
        '--domain', 'flag-shop.example.com',
        '--scope', 'orders:read=Read orders',
        '--scope', 'orders:write:Change orders',
        '--scope', 'admin',
        '--route', 'GET /orders/{id} orders:read',
        '--route', 'post /orders orders:write,admin',
      ],
      env,
    );
    expect(platform.scopes.map((s: { name: string }) => s.name)).toEqual(['orders:read', 'orders:write', 'admin']);
    expect(platform.scopes[0].description).toBe('Read orders');
    expect(platform.scopes[1].description).toBe('Change orders');
    expect(platform.routes).toEqual([
      { method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] },
      { method: 'POST', path: '/orders', scopes: ['orders:write', 'admin'] },
    ]);

    const updated = await aceJson(['platform', 'update', platform.platform_id, '--name', 'Renamed Shop'], env);
    expect(updated.name).toBe('Renamed Shop');
    expect(updated.scopes).toHaveLength(3);
    expect(updated.resources).toEqual([]);

    // --resource, repeated, replaces the list; shown normalised in `platform show` and `platform list`.
    const withResources = await aceJson(
      ['platform', 'update', platform.platform_id, '--resource', 'HTTPS://Flag-Shop.example.com:443/mcp/', '--resource', 'http://127.0.0.1:3000/mcp'],
      env,
    );
    expect(withResources.resources).toEqual(['https://flag-shop.example.com/mcp', 'http://127.0.0.1:3000/mcp']);
    const shown = await ace(['platform', 'show', platform.platform_id], env);
    expect(shown.stdout).toMatch(/resources\s+https:\/\/flag-shop\.example\.com\/mcp http:\/\/127\.0\.0\.1:3000\/mcp/);
    const refused = await ace(['platform', 'update', platform.platform_id, '--resource', 'http://flag-shop.example.com/mcp'], env);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('resources[0]');
  });

  it('manages an agent and its access: create, grant, deactivate, activate, rotate secret, revoke', async () => {
    const platform = await createPlatformFromYaml();
    const platformId: string = platform.platform_id;

    // Create: the secret goes to stdout once, never to stderr.
    const created = await ace(['agent', 'create', '--name', 'cli-agent'], env);
    expect(created.code, created.stderr).toBe(0);
    const agent = fieldsOf(created.stdout);
    expect(agent.agent_id).toMatch(UUID);
    expect(agent.status).toBe('active');
    expect(agent.api_key_id).toBeTruthy();
    expect(agent.secret).toBeTruthy();
    expect(created.stderr).not.toContain(agent.secret);

    // No grant yet: the platform refuses.
    await tokenStatus(403, agent.api_key_id, agent.secret, platformId);

    const grant = await aceJson(['grant', agent.agent_id, platformId, 'orders:write', 'orders:read'], env);
    expect(grant.agent_id).toBe(agent.agent_id);
    expect(grant.platform_id).toBe(platformId);
    expect([...grant.scopes].sort()).toEqual(['orders:read', 'orders:write']);

    const issued = await tokenStatus(200, agent.api_key_id, agent.secret, platformId);
    const claims = jwtPayload(issued.body.access_token);
    expect(claims.sub).toBe(agent.agent_id);
    expect(claims.aud).toBe(platformId);
    expect(claims.scope).toBe('orders:read orders:write');

    const shown = await aceJson(['agent', 'show', agent.agent_id], env);
    expect(shown.name).toBe('cli-agent');
    expect(shown).not.toHaveProperty('secret');
    expect(shown.grants.map((g: { platform_id: string }) => g.platform_id)).toEqual([platformId]);
    const listed = await ace(['agent', 'list'], env);
    expect(listed.stdout).toMatch(new RegExp(`${agent.agent_id}\\s+cli-agent\\s+active`));

    // A scope the platform does not define: the service's 422 comes through as exit 1.
    const badGrant = await ace(['grant', agent.agent_id, platformId, 'orders:delete'], env);
    expect(badGrant.code).toBe(1);
    expect(badGrant.stderr).toContain('HTTP 422');

    const deactivated = await ace(['agent', 'deactivate', agent.agent_id], env);
    expect(deactivated.code, deactivated.stderr).toBe(0);
    expect(deactivated.stdout).toContain('inactive');
    await tokenStatus(403, agent.api_key_id, agent.secret, platformId);

    expect((await aceJson(['agent', 'activate', agent.agent_id], env)).status).toBe('active');
    await tokenStatus(200, agent.api_key_id, agent.secret, platformId);

    // Rotation with a grace period: old and new both work.
    const graced = await aceJson<{ api_key_id: string; secret: string }>(['agent', 'rotate-secret', agent.agent_id, '--grace', '300'], env);
    expect(graced.secret).toBeTruthy();
    expect(graced.secret).not.toBe(agent.secret);
    await tokenStatus(200, graced.api_key_id, graced.secret, platformId);
    await tokenStatus(200, agent.api_key_id, agent.secret, platformId);

    // Rotation without grace: the replaced secret stops at once, the new one works.
    const rotated = await ace(['agent', 'rotate-secret', agent.agent_id], env);
    expect(rotated.code, rotated.stderr).toBe(0);
    const fresh = fieldsOf(rotated.stdout);
    expect(fresh.secret).toBeTruthy();
    expect(rotated.stderr).not.toContain(fresh.secret);
    await tokenStatus(401, graced.api_key_id, graced.secret, platformId);
    await tokenStatus(200, fresh.api_key_id, fresh.secret, platformId);

    const revoked = await ace(['revoke', agent.agent_id, platformId], env);
    expect(revoked.code, revoked.stderr).toBe(0);
    await tokenStatus(403, fresh.api_key_id, fresh.secret, platformId);
    expect((await aceJson(['agent', 'show', agent.agent_id], env)).grants).toEqual([]);
  });

  it('fetches the scope file from the public port, to stdout, to a file, or as JSON', async () => {
    const platform = await createPlatformFromYaml();
    const expected = {
      schema: 'SvcScopesYaml',
      version: 1,
      platform_id: platform.platform_id,
      scopes: [
        { name: 'orders:read', description: 'Read orders' },
        { name: 'orders:write', description: 'Change orders' },
      ],
      routes: [{ method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] }],
    };
    // Only the public URL is needed: no admin token, no admin URL.
    const publicOnly = { ACE_PUBLIC_URL: service.publicUrl };

    const printed = await ace(['platform', 'scopes-file', platform.platform_id], publicOnly);
    expect(printed.code, printed.stderr).toBe(0);
    expect(parseYaml(printed.stdout)).toEqual(expected);

    const file = path.join(work, 'scopes.yaml');
    const written = await ace(['platform', 'scopes-file', platform.platform_id, '-o', file], publicOnly);
    expect(written.code, written.stderr).toBe(0);
    expect(written.stdout).toBe('');
    expect(parseYaml(readFileSync(file, 'utf8'))).toEqual(expected);

    expect(await aceJson(['platform', 'scopes-file', platform.platform_id], publicOnly)).toEqual(expected);

    const unknown = await ace(['platform', 'scopes-file', randomUUID()], publicOnly);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('HTTP 404');
  });

  it('lists, rotates and retires signing keys', async () => {
    const before = await aceJson<{ keys: { kid: string; state: string }[] }>(['keys', 'list'], env);
    const active = before.keys.filter((k) => k.state === 'active');
    expect(active).toHaveLength(1);
    const oldKid = active[0].kid;

    const table = await ace(['keys', 'list'], env);
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^KID\s+STATE/);
    expect(table.stdout).toMatch(new RegExp(`${oldKid}\\s+active`));

    // The active key cannot be retired (checked before rotating, while no other key can take over):
    // the service refuses, exit 1 with its detail.
    const refused = await ace(['keys', 'retire', oldKid], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/HTTP 4\d\d/);

    const rotated = await aceJson<{ kid: string; state: string }>(['keys', 'rotate'], env);
    expect(rotated.kid).not.toBe(oldKid);
    expect(['next', 'active']).toContain(rotated.state);
    const jwks = (await (await fetch(`${service.publicUrl}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] };
    expect(jwks.keys.map((k: { kid: string }) => k.kid)).toContain(rotated.kid);

    // After the propagation window (2 s here) the new key is active and the old one can be retired.
    const deadline = Date.now() + 15_000;
    let keys = before.keys;
    while (Date.now() < deadline) {
      keys = (await aceJson<{ keys: { kid: string; state: string }[] }>(['keys', 'list'], env)).keys;
      if (keys.find((k) => k.kid === rotated.kid)?.state === 'active') break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(keys.find((k) => k.kid === rotated.kid)?.state).toBe('active');
    expect(keys.find((k) => k.kid === oldKid)?.state).toBe('retiring');

    const retired = await ace(['keys', 'retire', oldKid], env);
    expect(retired.code, retired.stderr).toBe(0);
    expect(fieldsOf(retired.stdout)).toMatchObject({ kid: oldKid, state: 'retired' });
    const after = (await (await fetch(`${service.publicUrl}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] };
    expect(after.keys.map((k: { kid: string }) => k.kid)).not.toContain(oldKid);
  });

  it('exits 1 with the service detail on a wrong admin token, and never prints the token', async () => {
    const wrong = `wrong-${randomUUID()}`;
    const direct = await fetch(`${service.adminUrl}/admin/v1/platforms`, { headers: { authorization: `Bearer ${wrong}` } });
    expect(direct.status).toBe(401);
    const { detail, error_code } = (await direct.json()) as { detail: string; error_code: string };

    const run = await ace(['platform', 'list'], { ...env, ACE_ADMIN_TOKEN: wrong });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(detail);
    expect(run.stderr).toContain(error_code);
    expect(run.stderr).toContain('HTTP 401');
    expect(run.stderr).not.toContain(wrong);
    expect(run.stderr).not.toContain(service.adminToken);

    // --token wins over the environment.
    const flag = await ace(['platform', 'list', '--token', service.adminToken], { ...env, ACE_ADMIN_TOKEN: wrong });
    expect(flag.code, flag.stderr).toBe(0);
  });

  it('reads the admin token from <DATA_DIR>/admin-token when none is given', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ace-cli-data-'));
    writeFileSync(path.join(dataDir, 'admin-token'), `${service.adminToken}\n`, { mode: 0o600 });
    const run = await ace(['agent', 'list', '--json'], { ACE_ADMIN_URL: service.adminUrl, DATA_DIR: dataDir });
    expect(run.code, run.stderr).toBe(0);
    expect(Array.isArray(JSON.parse(run.stdout).agents)).toBe(true);

    // And ./data/admin-token relative to the working directory when DATA_DIR is unset too.
    const cwd = mkdtempSync(path.join(os.tmpdir(), 'ace-cli-cwd-'));
    mkdirSync(path.join(cwd, 'data'));
    writeFileSync(path.join(cwd, 'data', 'admin-token'), service.adminToken);
    const fromCwd = await ace(['keys', 'list'], { ACE_ADMIN_URL: service.adminUrl }, cwd);
    expect(fromCwd.code, fromCwd.stderr).toBe(0);
  });

  it('reports an unknown record as exit 1 with the 404 detail', async () => {
    const run = await ace(['platform', 'show', randomUUID()], env);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('HTTP 404');
    expect(run.stderr).toContain('not_found');
  });
});
