// The two libraries install on their own: each workspace package is packed, the tarballs are installed into
// an empty project outside the repository (no access to its node_modules), and the examples shipped inside
// the installed packages run against a live service — setup through the admin API, the middleware's
// node:http platform, then the client's agent, whose three calls end 200, 201 and 403. The install sizes
// are held: the client brings only jose (itself without dependencies: it signs private_key_jwt assertions),
// the middleware at most 10 packages and 15 MiB. The server's
// own tarball installs beside them and its `ace` CLI talks to the live service. The private protocol package
// (packages/protocol) is never a dependency of the published two: the middleware's build carries a copy of
// its compiled files (dist/protocol), and nothing the packed middleware holds names the protocol package;
// only the (private) server's tarball depends on it, and installs beside its packed tarball.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startService, type ServiceHandle } from '../support/service.js';
import { freePort } from '../../kit/ports.js';

const exec = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname ?? path.dirname(new URL(import.meta.url).pathname), '../..');
const NPM_FLAGS = ['--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'];

let service: ServiceHandle;
let platform: ChildProcess | undefined;
const work = mkdtempSync(path.join(os.tmpdir(), 'ace-packages-'));
const tarballs: Record<string, string> = {};

/** `npm pack` of one directory into `work`; the build ran already (npm test builds first). */
async function pack(dir: string): Promise<string> {
  const { stdout } = await exec('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], { cwd: dir });
  return path.join(work, JSON.parse(stdout)[0].filename);
}

/** An empty project with only the given tarballs installed. */
async function project(name: string, specs: string[]): Promise<string> {
  const dir = path.join(work, name);
  rmSync(dir, { recursive: true, force: true });
  await exec('mkdir', ['-p', dir]);
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true, type: 'module' }));
  await exec('npm', ['install', ...NPM_FLAGS, ...specs], { cwd: dir, timeout: 240_000 });
  return dir;
}

function installed(dir: string): { packages: string[]; bytes: number } {
  const packages: string[] = [];
  const nm = path.join(dir, 'node_modules');
  for (const entry of readdirSync(nm)) {
    if (entry.startsWith('.')) continue;
    if (entry.startsWith('@')) for (const inner of readdirSync(path.join(nm, entry))) packages.push(`${entry}/${inner}`);
    else packages.push(entry);
  }
  const size = (p: string): number => {
    const s = statSync(p);
    return s.isDirectory() ? readdirSync(p).reduce((sum, e) => sum + size(path.join(p, e)), 0) : s.size;
  };
  return { packages, bytes: size(nm) };
}

function run(file: string, cwd: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [file], { cwd, env: { PATH: process.env.PATH ?? '', ...env } });
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, output })));
}

beforeAll(async () => {
  service = await startService({ mode: 'real' });
  tarballs.middleware = await pack(path.join(ROOT, 'packages/middleware'));
  tarballs.client = await pack(path.join(ROOT, 'packages/client'));
  tarballs.protocol = await pack(path.join(ROOT, 'packages/protocol'));
  tarballs.server = await pack(ROOT);
}, 240_000);

afterAll(async () => {
  platform?.kill('SIGKILL');
  await service?.dispose();
  rmSync(work, { recursive: true, force: true });
});

it('the client installs with jose only and the middleware within 10 packages and 15 MiB', { timeout: 300_000 }, async () => {
  const client = installed(await project('only-client', [tarballs.client]));
  expect(client.packages.sort()).toEqual(['@agent-credential-exchange/client', 'jose']);
  const middleware = installed(await project('only-middleware', [tarballs.middleware]));
  expect(middleware.packages).toContain('@agent-credential-exchange/middleware');
  expect(middleware.packages.length, middleware.packages.join(', ')).toBeLessThanOrEqual(10);
  expect(middleware.bytes).toBeLessThanOrEqual(15 * 2 ** 20);
  for (const heavy of ['uWebSockets.js', '@electric-sql/pglite', '@node-rs/argon2', 'postgres', 'ioredis']) expect(middleware.packages).not.toContain(heavy);
});

it('the installed middleware carries the protocol inside its dist and never names the protocol package', { timeout: 300_000 }, async () => {
  const dir = await project('middleware-protocol', [tarballs.middleware]);
  const installedPackage = path.join(dir, 'node_modules/@agent-credential-exchange/middleware');
  expect(installed(dir).packages).not.toContain('@agent-credential-exchange/protocol');
  const manifest = JSON.parse(readFileSync(path.join(installedPackage, 'package.json'), 'utf8')) as Record<string, Record<string, string> | undefined>;
  for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies']) expect(Object.keys(manifest[field] ?? {})).not.toContain('@agent-credential-exchange/protocol');
  const files = (dir: string): string[] => readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)]));
  const shipped = files(path.join(installedPackage, 'dist'));
  expect(shipped.filter((f) => /\.(js|d\.ts)$/.test(f) && readFileSync(f, 'utf8').includes('@agent-credential-exchange/protocol'))).toEqual([]);
  for (const entry of ['feed-document', 'scopes-file', 'scope-file-validator', 'resource-identifier']) {
    expect(shipped).toContain(path.join(installedPackage, 'dist/protocol', `${entry}.js`));
  }
  // The protocol's code answers through the middleware's own entries, on its own.
  writeFileSync(
    path.join(dir, 'check.mjs'),
    `import { normaliseResource, loadScopeFile } from '@agent-credential-exchange/middleware';
import { SvcScopesYaml } from '@agent-credential-exchange/middleware/scopes-file';
import { FEED_SUBPROTOCOL } from '@agent-credential-exchange/middleware/feed-document';
let refused = '';
try { loadScopeFile({ scopesDocument: { schema: 'SvcScopesYaml', version: 1, platform_id: 'nope', scopes: [], routes: [] } }); } catch (e) { refused = e.message; }
console.log(JSON.stringify({ resource: normaliseResource('HTTPS://API.Example.COM:443/%6Dcp/'), schema: SvcScopesYaml.$id, subprotocol: FEED_SUBPROTOCOL, refused }));
`,
  );
  const checked = await run(path.join(dir, 'check.mjs'), dir, {});
  expect(checked.code, checked.output).toBe(0);
  expect(JSON.parse(checked.output)).toEqual({
    resource: { ok: true, resource: 'https://api.example.com/mcp' },
    schema: 'SvcScopesYaml',
    subprotocol: 'ace-feed',
    refused: expect.stringContaining('/platform_id must match format "uuid"'),
  });
});

it('the examples shipped in the installed packages run end to end against the service', { timeout: 300_000 }, async () => {
  const dir = await project('platform-and-agent', [tarballs.middleware, tarballs.client]);
  const env = {
    ACE_ADMIN_URL: service.adminUrl,
    ACE_ADMIN_TOKEN: service.adminToken,
    ACE_PUBLIC_URL: service.publicUrl,
    EXAMPLE_DIR: path.join(dir, 'data'),
  };
  const setup = await run(path.join(ROOT, 'examples', 'setup.mjs'), dir, env);
  expect(setup.code, setup.output).toBe(0);

  const port = await freePort();
  platform = spawn(process.execPath, [path.join(dir, 'node_modules/@agent-credential-exchange/middleware/examples/platform.mjs')], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', ...env, PORT: String(port) },
  });
  let platformOutput = '';
  platform.stderr!.on('data', (c) => (platformOutput += c));
  await new Promise<void>((resolve, reject) => {
    platform!.stdout!.on('data', (c) => (String(c).includes('listening') ? resolve() : undefined));
    platform!.once('exit', () => reject(new Error(`platform exited: ${platformOutput}`)));
  });

  const agent = await run(path.join(dir, 'node_modules/@agent-credential-exchange/client/examples/agent.mjs'), dir, {
    ...env,
    PLATFORM_URL: `http://127.0.0.1:${port}`,
  });
  expect(agent.code, agent.output).toBe(0);
  expect(agent.output).toContain('GET /orders/42 -> 200');
  expect(agent.output).toContain('POST /orders -> 201');
  expect(agent.output).toContain('DELETE /orders/42 -> 403');
  expect(agent.output).toContain('insufficient_scope');
});

it('`ace` works from the installed server tarball', { timeout: 300_000 }, async () => {
  const dir = await project('operator', [tarballs.server, tarballs.protocol, tarballs.middleware, tarballs.client]);
  const ace = path.join(dir, 'node_modules/.bin/ace');
  const help = await exec(ace, ['--help'], { cwd: dir });
  expect(help.stdout).toMatch(/ace/);
  const env = { ...process.env, ACE_ADMIN_URL: service.adminUrl, ACE_ADMIN_TOKEN: service.adminToken };
  const listed = await exec(ace, ['platform', 'list', '--json'], { cwd: dir, env });
  expect(listed.stdout.length).toBeGreaterThan(0);
});
