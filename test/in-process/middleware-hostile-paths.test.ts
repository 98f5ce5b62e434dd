// No request path can stall a platform: the middleware's path check is linear in the path's length, a path
// or segment over the limits is answered 414 before anything reads it (the token check included), and a
// normal request beside 8 hostile-path requests is answered as if they were not there. Every adapter runs
// in this process behind a real HTTP server (node:http, Express both wirings, Fastify, Koa, Hono, Fetch);
// requests go over the wire with the path exactly as written. Tokens are signed with a local key served as
// the JWKS through the verifier's `fetch` option: no service process is needed.
//
// Work is compared with a baseline measured in the same run (the same requests with plain paths of the same
// lengths), never with a fixed duration.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import express from 'express';
import Fastify from 'fastify';
import Koa from 'koa';
import { Hono } from 'hono';
import { getRequestListener } from '@hono/node-server';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import {
  createVerifier,
  DEFAULT_MAX_PATH_LENGTH,
  DEFAULT_MAX_SEGMENT_LENGTH,
  expressAgentAuth,
  expressRouteGuard,
  fastifyAgentAuth,
  honoAgentAuth,
  koaAgentAuth,
  protectNodeHandler,
  RouteTable,
  withAgentAuth,
  type AgentEnv,
  type Verifier,
} from '../../packages/middleware/src/index.js';

const PLATFORM = '6f1c7f0e-1d2b-4c3a-9e8f-0a1b2c3d4e5f';
const ROUTES = [
  { method: 'GET' as const, path: '/orders/{id}', scopes: ['orders:read'] },
  { method: 'GET' as const, path: '/orders/export', scopes: ['orders:export'] },
  { method: 'GET' as const, path: '/files/{name}.json', scopes: ['files:read'] },
  // Three parameters in one segment: a regular expression for it backtracks polynomially.
  { method: 'GET' as const, path: '/v/{a}-{b}-{c}.json', scopes: ['files:read'] },
];
const ISSUER = 'https://ace.test';

let verifier: Verifier;
let token: string;
const servers: http.Server[] = [];
const ports: Record<string, number> = {};

async function listen(name: string, server: http.Server): Promise<void> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  ports[name] = (server.address() as AddressInfo).port;
}

interface Answer {
  status: number;
  contentType: string | undefined;
  body: string;
}

/** GET over the wire with the target exactly as written (node:http sends the path unchanged). */
function get(port: number, target: string, withToken = true): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = http.get({ host: '127.0.0.1', port, path: target, agent: false, headers: withToken ? { authorization: `Bearer ${token}` } : {} }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, contentType: response.headers['content-type'], body }));
      response.on('error', reject);
    });
    request.on('error', reject);
  });
}

beforeAll(async () => {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  const jwksFetch = (async () =>
    new Response(JSON.stringify({ keys: [jwk] }), { headers: { 'content-type': 'application/json', 'cache-control': 'max-age=600' } })) as typeof fetch;
  const scopesDocument = { schema: 'SvcScopesYaml', version: 1, platform_id: PLATFORM, scopes: [], routes: ROUTES };
  verifier = createVerifier({ serviceUrl: ISSUER, scopesDocument, fetch: jwksFetch, revocationFeed: false });
  await verifier.ready();
  token = await new SignJWT({ scope: 'orders:read orders:export files:read', svc_token_profile: 'svc-native-jwt' })
    .setProtectedHeader({ alg: 'RS256', kid: 'k1', typ: 'JWT' })
    .setIssuer(ISSUER)
    .setAudience(PLATFORM)
    .setSubject('agent-1')
    .setIssuedAt()
    .setExpirationTime('10m')
    .sign(privateKey);

  // Every handler that runs answers 200 with what it was given, so a refusal can only be the middleware's
  // (or the framework's own 404).
  await listen('node', http.createServer(protectNodeHandler(verifier, (req, res) => res.end(JSON.stringify({ agent: req.agent.agentId, url: req.url })))));

  const expressApp = express();
  expressApp.use(expressAgentAuth(verifier));
  expressApp.use((req, res) => void res.json({ agent: req.agent?.agentId, url: req.url }));
  await listen('express', http.createServer(expressApp));

  const guarded = express();
  const guard = expressRouteGuard(verifier);
  for (const template of ['/orders/:id', '/files/:name.json', '/v/:a-:b-:c.json']) guarded.get(template, guard, (req, res) => void res.json({ agent: req.agent?.agentId }));
  await listen('express-guard', http.createServer(guarded));

  const fastify = Fastify({ routerOptions: { maxParamLength: 100_000 } });
  await fastify.register(fastifyAgentAuth(verifier));
  fastify.get('/orders/:id', async (request) => ({ agent: (request as unknown as { agent: { agentId: string } }).agent.agentId }));
  fastify.get('/files/:name.json', async () => ({ ok: true }));
  await fastify.listen({ port: 0, host: '127.0.0.1' });
  ports.fastify = (fastify.server.address() as AddressInfo).port;
  servers.push(fastify.server);

  const koa = new Koa();
  koa.use(koaAgentAuth(verifier));
  koa.use((ctx) => {
    ctx.body = { agent: (ctx.state.agent as { agentId: string }).agentId, url: ctx.url };
  });
  await listen('koa', http.createServer(koa.callback()));

  const hono = new Hono<AgentEnv>();
  hono.use('*', honoAgentAuth(verifier));
  hono.get('*', (c) => c.json({ agent: c.get('agent').agentId, url: c.req.path }));
  await listen('hono', http.createServer(getRequestListener(hono.fetch)));

  const fetchHandler = withAgentAuth(verifier, (request, agent) => Response.json({ agent: agent.agentId, url: new URL(request.url).pathname }));
  await listen('fetch', http.createServer(getRequestListener(fetchHandler)));
}, 60_000);

afterAll(async () => {
  verifier?.close();
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
});

/** Paths shaped to hurt a path check: long runs of dots or spaces before a last character, many parameters' worth of separators, many segments. */
const hostileSegment = fc.oneof(
  fc.record({ unit: fc.constantFrom('.', '%20', '%20.', '-', '--x', ';', '%41', '~', 'a'), times: fc.integer({ min: 1, max: 6000 }), end: fc.constantFrom('', 'x', '.json', '-', '.') }).map(
    ({ unit, times, end }) => `${unit.repeat(times)}${end}`,
  ),
  fc.constantFrom('42', 'export', 'a.json', 'a-b-c.json'),
);
const hostilePath = fc
  .record({
    prefix: fc.constantFrom('/orders/', '/files/', '/v/', '/', '/x/y/'),
    segments: fc.array(hostileSegment, { minLength: 1, maxLength: 3 }),
    manySegments: fc.constantFrom(0, 0, 0, 10, 3000),
    query: fc.constantFrom('', '?q=1', `?${'q'.repeat(3000)}`),
  })
  .map(({ prefix, segments, manySegments, query }) => `${prefix}${segments.join('/')}${'/a'.repeat(manySegments)}${query}`)
  // Dot-segments ("." and "..") are resolved by the WHATWG URL parser in front of Hono and Fetch handlers
  // (and refused by the others): left out so that every adapter sees the same path.
  .filter((target) => !target.split('?')[0]!.split('/').some((segment) => segment === '.' || segment === '..') && target.length < 14_000);

function overLimits(target: string): boolean {
  const path = target.split('?')[0]!;
  return path.length > DEFAULT_MAX_PATH_LENGTH || path.split('/').some((segment) => segment.length > DEFAULT_MAX_SEGMENT_LENGTH);
}

/** What a middleware refusal looks like in every adapter: the contract's error shape, as JSON. */
function expectErrorShape(name: string, target: string, answer: Answer): void {
  expect([name, target.slice(0, 60), answer.contentType]).toEqual([name, target.slice(0, 60), expect.stringContaining('application/json')]);
  const body = JSON.parse(answer.body) as Record<string, unknown>;
  expect(typeof body.detail).toBe('string');
  expect(typeof body.error_code).toBe('string');
}

describe('hostile request paths in every adapter', () => {
  it('property: over the limits is 414 in the error shape, whatever the token; under them an ordinary answer', { timeout: 120_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(hostilePath, async (target) => {
        const tooLong = overLimits(target);
        for (const name of Object.keys(ports)) {
          const answer = await get(ports[name]!, target);
          // The Express route guard runs only on a route Express matched: a 404 of Express's own otherwise.
          if (name === 'express-guard' && answer.status === 404 && !answer.contentType?.includes('json')) continue;
          if (tooLong) {
            expect([name, target.slice(0, 60), answer.status]).toEqual([name, target.slice(0, 60), 414]);
            expectErrorShape(name, target, answer);
            // Before the token check: no token gets the same answer, not a 401.
            expect((await get(ports[name]!, target, false)).status).toBe(414);
          } else {
            expect([name, target.slice(0, 60), [200, 400, 403, 404].includes(answer.status)]).toEqual([name, target.slice(0, 60), true]);
            if (answer.status !== 200 && answer.status !== 404) expectErrorShape(name, target, answer);
          }
        }
      }),
      { numRuns: 40 },
    );
  });

  it('the limits can be set; an invalid one is refused at start-up', async () => {
    const scopesDocument = { schema: 'SvcScopesYaml', version: 1, platform_id: PLATFORM, scopes: [], routes: ROUTES };
    const strict = createVerifier({ serviceUrl: ISSUER, scopesDocument, revocationFeed: false, maxPathLength: 20, maxSegmentLength: 8 });
    expect(await strict.authorize({ method: 'GET', path: '/orders/123456789', authorization: undefined })).toMatchObject({ status: 414, code: 'invalid_request' });
    expect(await strict.authorize({ method: 'GET', path: `/orders/12345678?${'q'.repeat(100)}`, authorization: undefined })).toMatchObject({ status: 401 });
    expect(await strict.authorize({ method: 'GET', path: '/a/b/c/d/e/f/g/h/i/j/k', authorization: undefined })).toMatchObject({ status: 414 });
    strict.close();
    expect(() => createVerifier({ serviceUrl: ISSUER, scopesDocument, revocationFeed: false, maxSegmentLength: 0 })).toThrow(/maxSegmentLength/);
  });
});

/** Fastest of a few runs of `work`, in milliseconds of this process's CPU time. */
async function cpuMilliseconds(work: () => unknown, runs = 3): Promise<number> {
  let best = Infinity;
  for (let run = 0; run < runs; run++) {
    const before = process.cpuUsage();
    await work();
    const used = process.cpuUsage(before);
    best = Math.min(best, (used.user + used.system) / 1000);
  }
  return best;
}

describe('the path check is linear', () => {
  // No length limit here: the route table itself, on segments longer than any platform allows. The
  // three-parameter segments are shorter: a backtracking matcher would cost them the cube of their length.
  const table = new RouteTable(ROUTES);
  const n = 20_000;
  const families: [string, string][] = [
    ['dots before a last character', `/orders/${'.'.repeat(n)}x`],
    ['spaces and dots before a last character', `/orders/${'%20.'.repeat(n / 4)}x`],
    ['dots at the end', `/orders/x${'.'.repeat(n)}`],
    ['separators of a three-parameter segment', `/v/${'-'.repeat(1000)}`],
    ['a three-parameter segment that almost matches', `/v/${'a-'.repeat(700)}json`],
    ['many segments', `/orders${'/a'.repeat(n / 2)}`],
  ];

  it.each(families)('%s costs what a plain path of the same length costs', async (_name, hostile) => {
    const plain = `/orders/${'a'.repeat(hostile.length - '/orders/'.length)}`;
    // Enough repetitions for the plain path to take a measurable time.
    const repetitions = Math.ceil(200_000 / hostile.length);
    const baseline = await cpuMilliseconds(() => {
      for (let i = 0; i < repetitions; i++) table.resolvePath('GET', plain);
    });
    // A super-linear step costs 35 to hundreds of times the baseline at these lengths; a linear one under 7 times.
    // The hostile runs stop as soon as they exceed that budget, so a regression fails fast instead of hanging.
    const budget = 20 * baseline;
    let measured = Infinity;
    for (let attempt = 0; attempt < 3 && measured > budget; attempt++) {
      const before = process.cpuUsage();
      for (let i = 0; i < repetitions; i++) {
        table.resolvePath('GET', hostile);
        const used = process.cpuUsage(before);
        measured = (used.user + used.system) / 1000;
        if (measured > budget) break;
      }
    }
    expect(measured).toBeLessThanOrEqual(budget);
  });
});

describe('a normal request beside 8 hostile-path requests', () => {
  const hostile = [
    `/orders/${'.'.repeat(14_000)}x`,
    `/orders/${'.'.repeat(DEFAULT_MAX_SEGMENT_LENGTH - 1)}x`,
    `/v/${'-'.repeat(DEFAULT_MAX_SEGMENT_LENGTH)}`,
    `/orders/${'%20.'.repeat(300)}x`,
    `/orders${'/.x'.repeat(1300)}`,
    `/v/${'a-'.repeat(7000)}json`,
    `/orders/x${'.'.repeat(DEFAULT_MAX_SEGMENT_LENGTH - 1)}`,
    `/orders/${'.'.repeat(3000)}x/${'.'.repeat(3000)}x/${'.'.repeat(3000)}x`,
  ];
  // The same requests with plain characters: the same bytes on the wire, nothing to trip over.
  const plain = hostile.map((target) => target.replace(/[.%20-]/g, 'a'));

  it.each(['node', 'express', 'express-guard', 'fastify', 'koa', 'hono', 'fetch'])('%s: answers it as if they were not there, and they cost what plain paths cost', async (name) => {
    const port = ports[name]!;
    const alone = await get(port, '/orders/42');
    expect(alone.status).toBe(200);
    let beside: Answer | undefined;
    const burst = (targets: string[]) => async () => {
      const answers = await Promise.all([...targets.map((target) => get(port, target)), get(port, '/orders/42')]);
      beside = answers.at(-1);
    };
    const baseline = await cpuMilliseconds(burst(plain));
    const measured = await cpuMilliseconds(burst(hostile));
    expect(beside).toEqual(alone);
    expect(measured).toBeLessThanOrEqual(3 * baseline);
  });
});
