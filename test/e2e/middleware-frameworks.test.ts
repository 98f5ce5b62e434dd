// The packed middleware tarball, installed from the registry's point of view into
// fresh apps outside the repository (a temp dir: `npm install` of the tarball and the framework), enforces
// the same eight cases in every framework, with at most 3 lines of glue each (test/fixtures/frameworks):
// Express 4 and 5, Fastify 5, Koa (+ @koa/router), Hono on @hono/node-server, Next.js route handlers and
// the Fetch adapter inside an edge-runtime sandbox (Web APIs only, code generation from strings refused).
// Next.js itself is not installed: `next` weighs ~100 MiB with its SWC binary, too heavy for this matrix's
// CI time; its route-handler helper is called the way Next.js calls it, with real Request objects.
// The apps' framework installs are kept between runs in a cache folder (ACE_FRAMEWORK_APPS, default
// $TMPDIR/ace-framework-apps, one folder per app and dependency list, published whole by a rename); every
// run copies them into its own folder and `npm install`s the freshly packed tarball there, so the middleware
// under test is always this build's, and runs at the same time (CI's two Node lines, two checkouts) never
// install into the same folder.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type ServiceHandle } from '../support/service.js';
import { freePort } from '../../kit/ports.js';
import { AdminClient, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';

const exec = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');
const FIXTURES = path.join(ROOT, 'test/fixtures/frameworks');
const NPM_FLAGS = ['--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'];

interface AppSpec {
  name: string;
  /** Registry packages besides the tarball (`ws`: the feed's socket on Node 20, an optional peer). */
  install: string[];
  files: string[];
  main: string;
}
const APPS: AppSpec[] = [
  { name: 'express4', install: ['express@4', 'ws@8'], files: ['express.mjs'], main: 'express.mjs' },
  { name: 'express5', install: ['express@5', 'ws@8'], files: ['express.mjs'], main: 'express.mjs' },
  { name: 'fastify5', install: ['fastify@5', 'ws@8'], files: ['fastify.mjs'], main: 'fastify.mjs' },
  { name: 'koa', install: ['koa@3', '@koa/router@15', 'ws@8'], files: ['koa.mjs'], main: 'koa.mjs' },
  { name: 'hono', install: ['hono@4', '@hono/node-server@2', 'ws@8'], files: ['hono.mjs'], main: 'hono.mjs' },
  { name: 'next-route', install: ['@hono/node-server@2', 'ws@8'], files: ['next-route.mjs'], main: 'next-route.mjs' },
  { name: 'edge-runtime', install: ['edge-runtime@4', 'esbuild@0'], files: ['edge-worker.mjs', 'edge-host.mjs'], main: 'edge-host.mjs' },
];

const work = mkdtempSync(path.join(os.tmpdir(), 'ace-frameworks-'));
const APP_CACHE = process.env.ACE_FRAMEWORK_APPS ?? path.join(os.tmpdir(), 'ace-framework-apps');
const processes: ChildProcess[] = [];
const urls: Record<string, string> = {};
let service: ServiceHandle;
let admin: AdminClient;
let shop: PlatformRecord;
let other: PlatformRecord;
let agent: AgentCredentials;
let leaver: AgentCredentials;

/** The framework install of `app`, made once into the cache (a partial folder renamed into place: a concurrent run either wins or uses the winner's). */
async function cachedFrameworks(app: AppSpec): Promise<string> {
  const key = createHash('sha256').update(JSON.stringify(app.install)).digest('hex').slice(0, 12);
  const dir = path.join(APP_CACHE, `${app.name}-${key}`);
  const complete = () => existsSync(path.join(dir, 'node_modules/.package-lock.json'));
  if (complete()) return dir;
  const partial = `${dir}.${process.pid}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  writeFileSync(path.join(partial, 'package.json'), JSON.stringify({ name: app.name, version: '1.0.0', private: true, type: 'module' }));
  await exec('npm', ['install', ...NPM_FLAGS, ...app.install], { cwd: partial, timeout: 240_000 });
  try {
    renameSync(partial, dir);
  } catch (error) {
    if (!complete()) throw new Error(`${dir} holds an unfinished install: remove it (${(error as Error).message})`);
    rmSync(partial, { recursive: true, force: true }); // another run published it first
  }
  return dir;
}

/** This run's copy of the app: the cached frameworks plus this build's tarball. */
async function install(app: AppSpec, tarball: string): Promise<string> {
  const dir = path.join(work, app.name);
  cpSync(await cachedFrameworks(app), dir, { recursive: true, verbatimSymlinks: true });
  await exec('npm', ['install', ...NPM_FLAGS, tarball], { cwd: dir, timeout: 240_000 });
  for (const file of app.files) copyFileSync(path.join(FIXTURES, file), path.join(dir, file));
  return dir;
}

async function start(app: AppSpec, dir: string, env: Record<string, string>): Promise<string> {
  const port = await freePort();
  const child = spawn(process.execPath, [app.main], { cwd: dir, env: { PATH: process.env.PATH ?? '', ...env, PORT: String(port) } });
  processes.push(child);
  let output = '';
  child.stderr!.on('data', (c) => (output += c));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (c) => (String(c).includes('listening') ? resolve() : undefined));
    child.once('exit', (code) => reject(new Error(`${app.name} exited (${code}): ${output}`)));
  });
  return `http://127.0.0.1:${port}`;
}

async function tokenFor(who: AgentCredentials, platform: PlatformRecord): Promise<string> {
  const response = await fetch(`${service.publicUrl}/api/v1/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ api_key_id: who.api_key_id, secret: who.secret, platform_id: platform.platform_id }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { access_token: string }).access_token;
}

async function call(app: string, pathname: string, token?: string, method = 'GET') {
  const response = await fetch(`${urls[app]}${pathname}`, { method, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });
  const text = await response.text();
  return { status: response.status, challenge: response.headers.get('www-authenticate'), body: text.startsWith('{') ? (JSON.parse(text) as Record<string, unknown>) : text };
}

beforeAll(async () => {
  const packing = exec('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], { cwd: path.join(ROOT, 'packages/middleware') });
  service = await startService({ mode: 'real', env: { TOKEN_TTL_SECONDS: '6' } });
  admin = new AdminClient(service);
  shop = await admin.createPlatform({
    name: 'Shop',
    scopes: [
      { name: 'orders:read', description: 'Read orders' },
      { name: 'orders:delete', description: 'Delete orders' },
    ],
    routes: [
      { method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] },
      { method: 'DELETE', path: '/orders/{id}', scopes: ['orders:delete'] },
    ],
  });
  other = await admin.createPlatform({ name: 'Other', scopes: [{ name: 'x:read', description: 'x' }], routes: [] });
  agent = await admin.createAgent('frameworks');
  leaver = await admin.createAgent('leaver');
  await admin.grant(agent.agent_id, shop.platform_id, ['orders:read']);
  await admin.grant(agent.agent_id, other.platform_id, ['x:read']);
  await admin.grant(leaver.agent_id, shop.platform_id, ['orders:read']);
  const scopesFile = path.join(work, 'scopes.yaml');
  writeFileSync(scopesFile, await (await fetch(`${service.publicUrl}/api/v1/platforms/${shop.platform_id}/scopes.yaml`)).text());

  const tarball = path.join(work, JSON.parse((await packing).stdout)[0].filename);
  // Installs in parallel (network and disk bound), at most three at once.
  const dirs: Record<string, string> = {};
  const queue = [...APPS];
  await Promise.all(
    [0, 1, 2].map(async () => {
      for (let app = queue.shift(); app; app = queue.shift()) dirs[app.name] = await install(app, tarball);
    }),
  );
  const env = { SERVICE_URL: service.publicUrl, SCOPES_FILE: scopesFile, FEED_TOKEN: await admin.feedToken(shop.platform_id) };
  // Two at a time: each fetches the JWKS and the feed at start-up, within its 5 s timeout, on 2 cores.
  const starting = [...APPS];
  await Promise.all(
    [0, 1].map(async () => {
      for (let app = starting.shift(); app; app = starting.shift()) urls[app.name] = await start(app, dirs[app.name]!, env);
    }),
  );
}, 600_000);

afterAll(async () => {
  for (const child of processes) child.kill('SIGKILL');
  await service?.dispose();
  rmSync(work, { recursive: true, force: true });
});

describe('the packed middleware in fresh apps', () => {
  it('needs at most 3 lines of glue per framework', () => {
    for (const file of new Set(APPS.flatMap((a) => a.files))) {
      const text = readFileSync(path.join(FIXTURES, file), 'utf8');
      const glue = /\/\/ glue:start[^\n]*\n([\s\S]*?)\/\/ glue:end/.exec(text);
      if (file === 'edge-host.mjs') continue; // the sandbox's host, not the app
      expect(glue, file).not.toBeNull();
      expect(glue![1]!.split('\n').filter((line) => line.trim() !== '').length, file).toBeLessThanOrEqual(3);
    }
  });

  it('enforces the eight cases in every framework', { timeout: 120_000 }, async () => {
    const names = APPS.map((a) => a.name);
    // Expired: minted first (6 s lifetime, no leeway on the platforms), used once past its exp.
    const expiring = await tokenFor(agent, shop);
    const expiresAt = (JSON.parse(Buffer.from(expiring.split('.')[1]!, 'base64url').toString()) as { exp: number }).exp;
    const foreign = await tokenFor(agent, other);
    const answers = async (pathname: string, token?: string, method?: string) =>
      Object.fromEntries(await Promise.all(names.map(async (n) => [n, await call(n, pathname, token, method)] as const)));
    const each = (expected: (answer: Awaited<ReturnType<typeof call>>) => void, got: Record<string, Awaited<ReturnType<typeof call>>>) => {
      for (const [name, answer] of Object.entries(got)) {
        try {
          expected(answer);
        } catch (error) {
          throw new Error(`${name}: ${(error as Error).message} ${JSON.stringify(answer)}`);
        }
      }
    };

    // 1. no token: 401 and the plain challenge.
    each((a) => {
      expect(a.status).toBe(401);
      expect(a.challenge).toMatch(/^Bearer realm="[^"]+"$/);
    }, await answers('/orders/7'));
    // 2. good token: the handler runs and sees the agent.
    const good = await tokenFor(agent, shop);
    each((a) => expect(a).toMatchObject({ status: 200, body: { agent: agent.agent_id, id: '7' } }), await answers('/orders/7', good));
    // 3. wrong audience (a token for another platform).
    each((a) => {
      expect(a.status).toBe(401);
      expect(a.challenge).toContain('error="invalid_token"');
      expect(a.body).toMatchObject({ error_code: 'invalid_token', detail: 'The access token is meant for another platform.' });
    }, await answers('/orders/7', foreign));
    // 4. missing scope (DELETE needs orders:delete).
    each((a) => {
      expect(a.status).toBe(403);
      expect(a.challenge).toContain('scope="orders:delete"');
    }, await answers('/orders/7', good, 'DELETE'));
    // 5. garbage.
    each((a) => expect(a).toMatchObject({ status: 401, body: { error_code: 'invalid_token' } }), await answers('/orders/7', 'not-a.jwt.at-all'));
    // 6. a route the scope file does not list (the app serves it; the middleware closes it).
    each((a) => expect(a).toMatchObject({ status: 403, body: { error_code: 'insufficient_scope' } }), await answers('/unlisted', good));

    // 7. revoked: the operator takes the leaver's grant back; every platform refuses within 1 s.
    const leaving = await tokenFor(leaver, shop);
    each((a) => expect(a.status).toBe(200), await answers('/orders/1', leaving));
    const revokedAt = Date.now();
    await admin.revoke(leaver.agent_id, shop.platform_id);
    const refusedAfter: Record<string, number> = {};
    await Promise.all(
      names.map(async (name) => {
        while (Date.now() - revokedAt < 3000) {
          const answer = await call(name, '/orders/1', leaving);
          if (answer.status === 401) {
            expect(answer.body).toMatchObject({ detail: 'The access token was revoked.' });
            refusedAfter[name] = Date.now() - revokedAt;
            return;
          }
          expect(answer.status).toBe(200);
        }
      }),
    );
    // Milliseconds from the revoke's answer to the first refusal seen, per framework (undefined: not within 3 s).
    const late = names.filter((name) => !(refusedAfter[name]! <= 1000));
    expect(late.map((name) => [name, refusedAfter[name]])).toEqual([]);

    // 8. expired.
    while (Date.now() <= expiresAt * 1000 + 100) await new Promise((r) => setTimeout(r, 50));
    each((a) => expect(a).toMatchObject({ status: 401, body: { detail: 'The access token expired.' } }), await answers('/orders/7', expiring));
  });
});
