// Bodiless answers (HEAD, 304) and connection reuse, and graceful shutdown after them. This uWS build
// left such answers open and then called onAborted after them: the next request on the connection got
// no answer, the in-flight count went negative, SIGTERM reset requests still in flight, and a shutdown
// with nothing in flight waited the whole SHUTDOWN_TIMEOUT_MS. Clients here reuse connections.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import net from 'node:net';
import { AdminClient, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { contractErrorProblem, exchangeOnOneConnection, httpRequest, parseResponses, rawExchange, type RawResponse } from '../support/faults.js';

const get = (path: string, headers: Record<string, string> = {}) => httpRequest('GET', path, headers);
const head = (path: string) => httpRequest('HEAD', path);
const portOf = (url: string) => Number(new URL(url).port);

describe('keep-alive connections after HEAD and 304, then an idle shutdown', () => {
  let service: ServiceHandle;
  let platform: PlatformRecord;

  beforeAll(async () => {
    service = await startService({ mode: 'real', env: { SHUTDOWN_TIMEOUT_MS: '20000' } });
    ({ platform } = await new AdminClient(service).seed());
  });
  afterAll(async () => {
    await service?.dispose();
  });

  it('HEAD then GET on the same connection: both answered, HEAD with the GET length and no body', async () => {
    const port = portOf(service.publicUrl);
    const answers = await exchangeOnOneConnection(port, [head('/.well-known/jwks.json'), get('/.well-known/jwks.json'), head('/openapi.json'), get('/openapi.json'), head('/nowhere'), get('/.well-known/jwks.json')]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 404, 200]);
    expect(answers[0].headers['content-length']).toBe(String(answers[1].body.length));
    expect(answers[2].headers['content-length']).toBe(String(answers[3].body.length));
    // The admin port too (health checks often use HEAD).
    const admin = await exchangeOnOneConnection(portOf(service.adminUrl), [head('/healthz'), get('/healthz'), head('/healthz'), get('/healthz')]);
    expect(admin.map((a) => a.status)).toEqual([200, 200, 200, 200]);
  });

  it('If-None-Match → 304, then more requests on the same connection (JWKS and scope file)', async () => {
    const port = portOf(service.publicUrl);
    const scopes = `/api/v1/platforms/${platform.platform_id}/scopes.yaml`;
    const [jwks, scopeFile] = await exchangeOnOneConnection(port, [get('/.well-known/jwks.json'), get(scopes)]);
    const jwksTag = jwks.headers.etag;
    const scopesTag = scopeFile.headers.etag;
    expect(jwksTag && scopesTag).toBeTruthy();
    const answers = await exchangeOnOneConnection(port, [
      get('/.well-known/jwks.json', { 'If-None-Match': jwksTag }),
      get('/.well-known/jwks.json'),
      get(scopes, { 'If-None-Match': scopesTag }),
      get(scopes, { 'If-None-Match': '*' }),
      get(scopes),
      get('/.well-known/jwks.json', { 'If-None-Match': jwksTag }),
      head('/.well-known/jwks.json'),
      get('/.well-known/jwks.json'),
    ]);
    expect(answers.map((a) => a.status)).toEqual([304, 200, 304, 304, 200, 304, 200, 200]);
    expect(answers[0].headers.etag).toBe(jwksTag);
    expect(answers[2].headers.etag).toBe(scopesTag);
    expect(answers[4].body.toString()).toBe(scopeFile.body.toString());
  });

  it('an http.Agent with keepAlive reuses its one socket across HEAD, 304 and GET', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const call = (method: string, headers: Record<string, string> = {}) =>
      new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port: portOf(service.publicUrl), path: '/.well-known/jwks.json', method, headers, agent }, (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode!, reused: req.reusedSocket }));
        });
        req.on('error', reject);
        req.end();
      });
    try {
      const first = await call('GET');
      const tag = (await fetch(`${service.publicUrl}/.well-known/jwks.json`)).headers.get('etag')!;
      const rest = [await call('HEAD'), await call('GET', { 'if-none-match': tag }), await call('GET'), await call('HEAD'), await call('GET')];
      expect([first, ...rest].map((r) => r.status)).toEqual([200, 200, 304, 200, 200, 200]);
      expect(rest.every((r) => r.reused)).toBe(true);
    } finally {
      agent.destroy();
    }
  });

  // Last in this group: it stops the service.
  it('with nothing in flight after HEADs and 304s, SIGTERM exits long before SHUTDOWN_TIMEOUT_MS (20 s)', async () => {
    const port = portOf(service.publicUrl);
    const tag = (await fetch(`${service.publicUrl}/.well-known/jwks.json`)).headers.get('etag')!;
    // Bodiless answers on connections the client then closes (uWS reports those as aborted).
    for (let i = 0; i < 5; i++) expect((await rawExchange(port, head('/.well-known/jwks.json'), { head: true })).responses[0]?.status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await rawExchange(port, get('/.well-known/jwks.json', { 'If-None-Match': tag }))).responses[0]?.status).toBe(304);
    expect((await rawExchange(portOf(service.adminUrl), head('/healthz'), { head: true })).responses[0]?.status).toBe(200);
    const started = Date.now();
    const exit = await service.stop('SIGTERM');
    const tookMs = Date.now() - started;
    expect(exit.code).toBe(0);
    expect(tookMs, service.output().slice(-1500)).toBeLessThan(10_000); // generous: a broken count waits 20 s
  });
});

describe('SIGTERM after HEADs, with 40 token requests in flight', () => {
  let service: ServiceHandle;
  let platform: PlatformRecord;
  let agent: AgentCredentials;

  beforeAll(async () => {
    service = await startService({
      mode: 'real',
      env: { SHUTDOWN_TIMEOUT_MS: '20000', RATE_LIMIT_AUTH_FAIL_POINTS: '1000000', RATE_LIMIT_TOKEN_POINTS: '1000000' },
    });
    ({ platform, agent } = await new AdminClient(service).seed());
  });
  afterAll(async () => {
    await service?.dispose();
  });

  it('answers every request in flight', async () => {
    const port = portOf(service.publicUrl);
    for (let i = 0; i < 5; i++) expect((await rawExchange(port, head('/.well-known/jwks.json'), { head: true })).responses[0]?.status).toBe(200);

    // 40 connections, each warmed with a GET (so they are accepted before the signal), then each sends a
    // token request: wrong secrets cost an argon2 run each, so they queue behind one argon2 thread.
    const sockets = await Promise.all(
      Array.from({ length: 40 }, () => new Promise<net.Socket>((resolve, reject) => {
        const socket = net.connect(port, '127.0.0.1', () => resolve(socket));
        socket.on('error', reject);
      })),
    );
    const warmed: (() => void)[] = [];
    const allWarm = Promise.all(sockets.map((_, i) => new Promise<void>((r) => (warmed[i] = r))));
    const answers = sockets.map(
      (socket, i) =>
        new Promise<RawResponse | string>((resolve) => {
          let bytes: Buffer = Buffer.alloc(0);
          let stage = 0; // 0: warm-up GET, 1: token request
          socket.removeAllListeners('error');
          socket.on('error', (error) => resolve(`error ${(error as NodeJS.ErrnoException).code}`));
          socket.on('close', () => resolve('closed without an answer'));
          socket.on('data', (chunk) => {
            bytes = Buffer.concat([bytes, chunk]);
            const { responses, rest } = parseResponses(bytes);
            if (responses.length === 0) return;
            bytes = rest;
            if (stage++ === 1) return resolve(responses[0]);
            warmed[i]();
          });
          socket.write(get('/.well-known/jwks.json'));
        }),
    );
    await allWarm;
    const body = JSON.stringify({ api_key_id: agent.api_key_id, secret: 'wrong-secret', platform_id: platform.platform_id });
    const firstAnswer = Promise.race(answers);
    sockets.forEach((socket) => socket.write(httpRequest('POST', '/api/v1/auth/token', { 'Content-Type': 'application/json' }, body)));
    await firstAnswer; // the service is working through them: the rest are in flight
    service.process.kill('SIGTERM');
    const results = await Promise.all(answers);
    const unanswered = results.filter((r) => typeof r === 'string');
    expect(unanswered, `${unanswered.length} of 40 token requests got no answer`).toEqual([]);
    for (const r of results as RawResponse[]) {
      expect([401, 429, 503]).toContain(r.status); // wrong secret (or a guard's refusal): answered either way
      expect(contractErrorProblem(r.status, r.headers['content-type'], r.body)).toBeNull();
    }
    expect((await service.stop('SIGTERM')).code).toBe(0);
  });
});
