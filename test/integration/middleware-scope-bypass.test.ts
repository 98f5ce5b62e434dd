// The scopes the middleware enforces are those of the handler the framework really runs, however the path
// is spelled. Real service (tokens), real node:http, Express 5 and Fastify 5 apps, requests written on raw
// sockets so no client normalises them. Scope file: GET /orders/{id} needs orders:read, GET /orders/export
// needs orders:export. Every handler records that it ran; the assertions read those records, not only
// the status codes.
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import express from 'express';
import Fastify from 'fastify';
import fc from 'fast-check';
import { startService, type ServiceHandle } from '../support/service.js';
import { AdminClient, type PlatformRecord } from '../../kit/admin.js';
import * as middleware from '../../packages/middleware/src/index.js';
import { createVerifier, expressAgentAuth, fastifyAgentAuth, protectNodeHandler, type Verifier } from '../../packages/middleware/src/index.js';

/** The scope-file rule of each handler the apps have; handlers the scope file lacks need the impossible. */
const HANDLER_SCOPES: Record<string, string[]> = {
  export: ['orders:export'],
  read: ['orders:read'],
  unlisted: ['(not in the scope file)'],
};

interface Ran {
  app: string;
  handler: string;
  probe: string;
}
const ran: Ran[] = [];

let service: ServiceHandle;
let shop: PlatformRecord;
let verifier: Verifier;
const tokens: Record<'reader' | 'exporter' | 'exportOnly', { token: string; scopes: string[] }> = {} as never;
const apps: Record<string, number> = {};
const closers: (() => unknown)[] = [];

interface RawResponse {
  status: number;
  headers: string;
  text: string;
}

/** One request, written byte for byte, on a fresh connection. */
function rawRequest(port: number, method: string, target: string, token: string | undefined, probe: string): Promise<RawResponse> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let data = '';
    const done = () => {
      const head = data.split('\r\n\r\n', 1)[0];
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0);
      resolve({ status, headers: head, text: data });
    };
    socket.setEncoding('latin1');
    socket.on('data', (chunk) => (data += chunk));
    socket.on('close', done);
    socket.on('error', () => undefined);
    socket.setTimeout(15_000, () => socket.destroy());
    socket.write(
      `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Probe: ${probe}\r\n` +
        (token ? `Authorization: Bearer ${token}\r\n` : '') +
        'Connection: close\r\n\r\n',
      'latin1',
    );
  });
}

function record(app: string, handler: string, probe: unknown) {
  ran.push({ app, handler, probe: String(probe) });
}

async function listen(server: http.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise((r) => server.close(r)));
  return (server.address() as AddressInfo).port;
}

async function mintToken(apiKeyId: string, secret: string): Promise<string> {
  const response = await fetch(`${service.publicUrl}/api/v1/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ api_key_id: apiKeyId, secret, platform_id: shop.platform_id }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { access_token: string }).access_token;
}

beforeAll(async () => {
  service = await startService({ mode: 'real' });
  const admin = new AdminClient(service);
  shop = await admin.createPlatform({
    name: 'Bypass shop',
    scopes: [
      { name: 'orders:read', description: 'Read orders' },
      { name: 'orders:export', description: 'Export all orders' },
    ],
    routes: [
      { method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] },
      { method: 'GET', path: '/orders/export', scopes: ['orders:export'] },
    ],
  });
  const grants: Record<keyof typeof tokens, string[]> = {
    reader: ['orders:read'],
    exporter: ['orders:read', 'orders:export'],
    exportOnly: ['orders:export'],
  };
  for (const [name, scopes] of Object.entries(grants) as [keyof typeof tokens, string[]][]) {
    const agent = await admin.createAgent(`bypass-${name}`);
    await admin.grant(agent.agent_id, shop.platform_id, scopes);
    tokens[name] = { token: await mintToken(agent.api_key_id, agent.secret), scopes };
  }
  const scopesYaml = await (await fetch(`${service.publicUrl}/api/v1/platforms/${shop.platform_id}/scopes.yaml`)).text();
  verifier = createVerifier({ serviceUrl: service.publicUrl, scopesYaml, feedToken: await admin.feedToken(shop.platform_id) });
  await verifier.ready();

  // node:http with a lenient hand-written router: decodes, folds case, drops trailing slashes and
  // ";params" — the kind of listener a canonical check must still protect.
  const lenient = protectNodeHandler(verifier, (req, res) => {
    const probe = req.headers['x-probe'];
    const pathname = new URL(req.url ?? '/', 'http://platform').pathname;
    let path: string;
    try {
      path = decodeURIComponent(pathname);
    } catch {
      path = pathname;
    }
    path = path.toLowerCase().replace(/;[^/]*/g, '').replace(/\/+$/, '').trim();
    const method = (req.method ?? '').toUpperCase();
    let handler = 'none';
    if ((method === 'GET' || method === 'HEAD') && path === '/orders/export') handler = 'export';
    else if ((method === 'GET' || method === 'HEAD') && path === '/orders/export/all') handler = 'unlisted';
    else if ((method === 'GET' || method === 'HEAD') && /^\/orders\/[^/]+$/.test(path)) handler = 'read';
    else if (method === 'DELETE' && /^\/orders\/[^/]+$/.test(path)) handler = 'unlisted';
    if (handler !== 'none') record('node', handler, probe);
    res.writeHead(handler === 'none' ? 404 : 200, { 'x-handler': handler });
    res.end(handler);
  });
  apps.node = await listen(http.createServer(lenient));

  // Express 5, app-level middleware before the routes; the parameter route first, as apps often have it.
  const app = express();
  app.use(expressAgentAuth(verifier) as express.RequestHandler);
  app.get('/orders/export/all', (req, res) => (record('express', 'unlisted', req.headers['x-probe']), res.set('x-handler', 'unlisted').send('unlisted')));
  app.get('/orders/export', (req, res) => (record('express', 'export', req.headers['x-probe']), res.set('x-handler', 'export').send('export')));
  app.get('/orders/:id', (req, res) => (record('express', 'read', req.headers['x-probe']), res.set('x-handler', 'read').send('read')));
  app.delete('/orders/:id', (req, res) => (record('express', 'unlisted', req.headers['x-probe']), res.send('deleted')));
  apps.express = await listen(http.createServer(app));

  // Fastify 5 with the plugin: HEAD routes are created for every GET route.
  const fastify = Fastify();
  await fastify.register(fastifyAgentAuth(verifier));
  fastify.get('/orders/export', async (request, reply) => (record('fastify', 'export', request.headers['x-probe']), reply.header('x-handler', 'export'), 'export'));
  fastify.get('/orders/export/all', async (request) => (record('fastify', 'unlisted', request.headers['x-probe']), 'unlisted'));
  fastify.get('/orders/:id', async (request, reply) => (record('fastify', 'read', request.headers['x-probe']), reply.header('x-handler', 'read'), 'read'));
  fastify.delete('/orders/:id', async (request) => (record('fastify', 'unlisted', request.headers['x-probe']), 'deleted'));
  await fastify.listen({ port: 0, host: '127.0.0.1' });
  apps.fastify = (fastify.server.address() as AddressInfo).port;
  closers.push(() => fastify.close());

  // Fastify with every lenient router option: the template it matched still decides.
  // useSemicolonDelimiter is read from routerOptions at run time; fastify's FastifyRouterOptions type lacks it.
  const lenientRouter = { caseSensitive: false, ignoreTrailingSlash: true, ignoreDuplicateSlashes: true, useSemicolonDelimiter: true };
  const lenientFastify = Fastify({ routerOptions: lenientRouter });
  await lenientFastify.register(fastifyAgentAuth(verifier));
  lenientFastify.get('/orders/export', async (request, reply) => (record('fastify-lenient', 'export', request.headers['x-probe']), reply.header('x-handler', 'export'), 'export'));
  lenientFastify.get('/orders/:id', async (request, reply) => (record('fastify-lenient', 'read', request.headers['x-probe']), reply.header('x-handler', 'read'), 'read'));
  await lenientFastify.listen({ port: 0, host: '127.0.0.1' });
  apps['fastify-lenient'] = (lenientFastify.server.address() as AddressInfo).port;
  closers.push(() => lenientFastify.close());
}, 120_000);

afterAll(async () => {
  for (const close of closers) await close();
  verifier?.close();
  await service?.dispose();
});

// [method, request target]: spellings a router might read as GET /orders/export.
const CORPUS: [string, string][] = [
  ['GET', '/orders/export'],
  ['GET', '/orders/EXPORT'],
  ['GET', '/orders/Export'],
  ['GET', '/orders/eXpOrT'],
  ['GET', '/ORDERS/export'],
  ['GET', '/Orders/Export'],
  ['GET', '/orders/%65xport'],
  ['GET', '/orders/e%78port'],
  ['GET', '/orders/ex%70ort'],
  ['GET', '/orders/exp%6Frt'],
  ['GET', '/orders/exp%6frt'],
  ['GET', '/orders/expo%72t'],
  ['GET', '/orders/expor%74'],
  ['GET', '/orders/%65%78%70%6F%72%74'],
  ['GET', '/orders/%45XPORT'],
  ['GET', '/%6Frders/export'],
  ['GET', '/orders/%2565xport'],
  ['GET', '/orders/%252565xport'],
  ['GET', '/orders//export'],
  ['GET', '//orders/export'],
  ['GET', '/orders/./export'],
  ['GET', '/orders/x/../export'],
  ['GET', '/orders/%2e/export'],
  ['GET', '/orders/x/%2e%2e/export'],
  ['GET', '/orders/x/.%2E/export'],
  ['GET', '/orders/export/'],
  ['GET', '/orders/export//'],
  ['GET', '/orders/export/.'],
  ['GET', '/orders/export;x=1'],
  ['GET', '/orders/export;'],
  ['GET', '/orders;x=1/export'],
  ['GET', '/orders%2Fexport'],
  ['GET', '/orders/%2Fexport'],
  ['GET', '/orders/%2fexport'],
  ['GET', '/orders/%5Cexport'],
  ['GET', '/orders\\export'],
  ['GET', '/orders/export%20'],
  ['GET', '/orders/%20export'],
  ['GET', '/orders/export%09'],
  ['GET', '/orders/export\t'],
  ['GET', '/orders/export%00'],
  ['GET', '/orders/export.'],
  ['GET', '/orders/export%2E'],
  ['GET', '/orders/export%2e%20'],
  ['GET', '/orders/export?x=1'],
  ['GET', '/orders/export#frag'],
  ['GET', 'http://127.0.0.1/orders/export'],
  ['GET', '/orders/exp%C5%BFrt'],
  ['HEAD', '/orders/export'],
  ['HEAD', '/orders/EXPORT'],
  ['HEAD', '/orders/%65xport'],
  ['HEAD', '/orders/export/'],
  ['get', '/orders/export'],
  ['Get', '/orders/EXPORT'],
  ['head', '/orders/%65xport'],
];

const APPS = ['node', 'express', 'fastify', 'fastify-lenient'] as const;

describe('scope bypass corpus', () => {
  it(`has at least 30 spellings (${CORPUS.length})`, () => {
    expect(CORPUS.length).toBeGreaterThanOrEqual(30);
  });

  it('the handlers are reachable with the right scopes (positive control)', async () => {
    for (const app of APPS) {
      const before = ran.length;
      const read = await rawRequest(apps[app], 'GET', '/orders/42', tokens.reader.token, `control-read-${app}`);
      expect([app, read.status, read.headers]).toEqual([app, 200, expect.stringMatching(/x-handler: read/i)]);
      const exported = await rawRequest(apps[app], 'GET', '/orders/export', tokens.exporter.token, `control-export-${app}`);
      expect([app, exported.status, exported.headers]).toEqual([app, 200, expect.stringMatching(/x-handler: export/i)]);
      expect(ran.slice(before).map((r) => r.handler)).toEqual(['read', 'export']);
    }
  });

  for (const app of APPS) {
    it(`${app}: no spelling runs the export handler with an orders:read token`, async () => {
      const outcomes: string[] = [];
      for (const [method, target] of CORPUS) {
        const probe = `${app}-${method}-${target}`;
        const before = ran.length;
        const response = await rawRequest(apps[app], method, target, tokens.reader.token, probe);
        const handlers = ran.slice(before).map((r) => r.handler);
        outcomes.push(`${method} ${JSON.stringify(target)} -> ${response.status} ${handlers.join(',') || '-'}`);
        // A response answered by a handler must name one the token may run; refusals are 4xx with no handler.
        if (handlers.length > 0) expect(response.status).toBe(200);
        else expect(response.status).toBeGreaterThanOrEqual(400);
      }
      if (process.env.SHOW_CORPUS) console.log(`${app}\n${outcomes.join('\n')}`);
      const breaches = outcomes.filter((o) => / (export|unlisted)$/.test(o) || /,/.test(o.split(' -> ')[1]));
      expect(breaches, outcomes.join('\n')).toEqual([]);
    });

    it(`${app}: requests without a valid token get 401 with a Bearer challenge, whatever the spelling`, async () => {
      for (const [method, target] of [['GET', '/orders/%65xport'], ['GET', '/orders/EXPORT'], ['GET', '/orders/42']] as const) {
        const before = ran.length;
        const bare = await rawRequest(apps[app], method, target, undefined, 'anon');
        expect([target, bare.status]).toEqual([target, 401]);
        expect(bare.headers).toMatch(new RegExp(`www-authenticate: Bearer realm="${shop.platform_id}"`, 'i'));
        const forged = await rawRequest(apps[app], method, target, `${tokens.exporter.token.slice(0, -4)}AAAA`, 'forged');
        expect([target, forged.status]).toEqual([target, 401]);
        expect(forged.headers).toMatch(/www-authenticate: Bearer .*error="invalid_token"/i);
        expect(ran.length).toBe(before);
      }
    });
  }
});

describe('property: whenever a handler runs, the token covers its route', () => {
  /**
   * A word respelled: one way of respelling (case, percent-encoding, double encoding, or any mix) applied
   * to a random subset of its letters, so each router's blind spot is hit often.
   */
  const spelled = (word: string) =>
    fc
      .tuple(
        fc.constantFrom('case', 'pct', 'double', 'mixed'),
        fc.array(fc.constantFrom('upper', 'pct', 'PCT', 'double'), { minLength: word.length, maxLength: word.length }),
        fc.array(fc.boolean(), { minLength: word.length, maxLength: word.length }),
      )
      .map(([way, kinds, touched]) =>
        [...word]
          .map((ch, i) => {
            if (!touched[i]) return ch;
            const hex = ch.charCodeAt(0).toString(16);
            const kind = way === 'case' ? 'upper' : way === 'pct' ? (kinds[i] === 'PCT' ? 'PCT' : 'pct') : way === 'double' ? 'double' : kinds[i];
            if (kind === 'upper') return ch.toUpperCase();
            if (kind === 'pct') return `%${hex}`;
            if (kind === 'PCT') return `%${hex.toUpperCase()}`;
            return `%25${hex}`;
          })
          .join(''),
      );
  const noise = ['42', 'x', '.', '..', '%2e', '%2E%2e', '', ';a=1', '%2F', '%5C', '%20', 'all', 'ALL', '%61ll', '%00', '%C5%BF', '%09'];
  const segment = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...noise) },
    { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z0-9%.;~_-]{0,6}$/) },
  );
  const last = fc.oneof(
    { weight: 4, arbitrary: fc.tuple(spelled('export'), fc.oneof({ weight: 6, arbitrary: fc.constant('') }, { weight: 2, arbitrary: fc.constantFrom(';v=1', '%20', '.', '%2e', '%09') })).map(([w, s]) => w + s) },
    { weight: 1, arbitrary: segment },
  );
  const structured = fc
    .tuple(fc.oneof({ weight: 4, arbitrary: fc.constant('orders') }, { weight: 1, arbitrary: spelled('orders') }), fc.oneof({ weight: 6, arbitrary: fc.constant([] as string[]) }, { weight: 1, arbitrary: fc.array(segment, { maxLength: 2 }) }), last, fc.oneof({ weight: 5, arbitrary: fc.constant([] as string[]) }, { weight: 1, arbitrary: fc.array(fc.constantFrom('all', 'ALL', '%61ll', '', '.'), { minLength: 1, maxLength: 1 }) }))
    .map(([first, middle, end, after]) => [first, ...middle, end, ...after]);
  const target = fc
    .tuple(fc.oneof({ weight: 9, arbitrary: structured }, { weight: 1, arbitrary: fc.array(segment, { minLength: 1, maxLength: 4 }) }), fc.constantFrom('', '', '', '', '/', '?q=1', '//', '#f'))
    .map(([segments, tail]) => `/${segments.join('/')}${tail}`);
  const method = fc.constantFrom('GET', 'GET', 'GET', 'GET', 'HEAD', 'DELETE', 'POST', 'get');
  const who = fc.constantFrom('reader', 'reader', 'reader', 'exporter', 'exportOnly') as fc.Arbitrary<keyof typeof tokens>;

  for (const app of APPS) {
    it(`${app}`, async () => {
      await fc.assert(
        fc.asyncProperty(method, target, who, async (m, t, w) => {
          const before = ran.length;
          await rawRequest(apps[app], m, t, tokens[w].token, 'property');
          for (const entry of ran.slice(before)) {
            const needed = HANDLER_SCOPES[entry.handler];
            expect({ request: `${m} ${t}`, token: w, handler: entry.handler, covered: needed.every((s) => tokens[w].scopes.includes(s)) }).toMatchObject({ covered: true });
          }
        }),
        { numRuns: 500, seed: Number(process.env.FC_SEED ?? Date.now() % 2 ** 31) },
      );
    }, 120_000);
  }
});

// Express's route guard: the scopes of exactly the route Express chose (req.route), whatever the spelling.
describe('Express route guard', () => {
  it('enforces the matched route template, and refuses routes the scope file lacks', async () => {
    const guardFactory = (middleware as Record<string, unknown>).expressRouteGuard as ((v: Verifier) => express.RequestHandler) | undefined;
    expect(guardFactory, 'expressRouteGuard is exported').toBeTypeOf('function');
    const guard = guardFactory!(verifier);
    const app = express();
    app.get('/orders/export', guard, (req, res) => (record('guard', 'export', req.headers['x-probe']), res.send('export')));
    app.get('/orders/:id', guard, (req, res) => (record('guard', 'read', req.headers['x-probe']), res.send('read')));
    app.get('/orders/export/all', guard, (req, res) => (record('guard', 'unlisted', req.headers['x-probe']), res.send('unlisted')));
    const router = express.Router();
    router.get('/:id', guard, (req, res) => (record('guard', 'read', req.headers['x-probe']), res.send('read')));
    app.use('/v2/orders', router);
    const port = await listen(http.createServer(app));

    for (const [method, target] of CORPUS) {
      const before = ran.length;
      await rawRequest(port, method, target, tokens.reader.token, 'guard');
      // Express runs the export route for /orders/EXPORT (case-insensitive): the guard must see that.
      expect(ran.slice(before).filter((r) => r.handler !== 'read')).toEqual([]);
    }
    const status = async (t: string, who: keyof typeof tokens) => (await rawRequest(port, 'GET', t, tokens[who].token, 'guard')).status;
    // Exactly the route's own scopes: orders:export alone cannot read, orders:read alone can.
    expect(await status('/orders/7', 'exportOnly')).toBe(403);
    expect(await status('/orders/7', 'reader')).toBe(200);
    // Unlisted route (no scope-file rule): refused for everyone.
    expect(await status('/orders/export/all', 'exporter')).toBe(403);
    // Router mounted at a fixed path: the rule is looked up by mount path + route template.
    expect(await status('/v2/orders/7', 'exporter')).toBe(403); // no rule for /v2/orders/{id}
    expect((await rawRequest(port, 'GET', '/orders/7', undefined, 'guard')).status).toBe(401);

    // A router mounted at /orders: the template is the mount path as matched plus the route's path.
    const mounted = express();
    const orders = express.Router();
    orders.get('/export', guard, (req, res) => (record('guard-mounted', 'export', req.headers['x-probe']), res.send('export')));
    orders.get('/:id', guard, (req, res) => (record('guard-mounted', 'read', req.headers['x-probe']), res.send('read')));
    mounted.use('/orders', orders);
    const mountedPort = await listen(http.createServer(mounted));
    const before = ran.length;
    for (const [method, target] of CORPUS) await rawRequest(mountedPort, method, target, tokens.reader.token, 'guard-mounted');
    expect(ran.slice(before).filter((r) => r.handler !== 'read')).toEqual([]);
    expect((await rawRequest(mountedPort, 'GET', '/orders/export', tokens.exporter.token, 'guard-mounted')).status).toBe(200);
    expect((await rawRequest(mountedPort, 'GET', '/orders/7', tokens.reader.token, 'guard-mounted')).status).toBe(200);
    // Express matched the mount case-insensitively; "/ORDERS" is not a template of the scope file: closed.
    expect((await rawRequest(mountedPort, 'GET', '/ORDERS/7', tokens.reader.token, 'guard-mounted')).status).toBe(403);

    // With `prefix`, the mount's template is given, so its spelling in the request no longer matters; a
    // parameter mount without it never lets the matched text be read as template syntax.
    const withPrefix = express();
    const byPrefix = express.Router();
    const prefixed = (middleware.expressRouteGuard as (v: Verifier, o: { prefix: string }) => express.RequestHandler)(verifier, { prefix: '/orders' });
    byPrefix.get('/:id', prefixed, (req, res) => (record('guard-prefix', 'read', req.headers['x-probe']), res.send('read')));
    withPrefix.use('/orders', byPrefix);
    const section = express.Router();
    section.get('/:id', guard, (req, res) => (record('guard-section', 'unlisted', req.headers['x-probe']), res.send('section')));
    withPrefix.use('/:section', section);
    const prefixPort = await listen(http.createServer(withPrefix));
    expect((await rawRequest(prefixPort, 'GET', '/ORDERS/7', tokens.reader.token, 'guard-prefix')).status).toBe(200);
    expect((await rawRequest(prefixPort, 'GET', '/x:id/7', tokens.exporter.token, 'guard-section')).status).toBe(403);
    expect((await rawRequest(prefixPort, 'GET', '/x%3Aid/7', tokens.exporter.token, 'guard-section')).status).toBe(403);
    expect(ran.filter((r) => r.app === 'guard-section')).toEqual([]);
  });
});
