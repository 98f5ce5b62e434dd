// Operations: graceful shutdown under load, cluster mode with summed metrics, structured access logs,
// and log redaction.
import { describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import http from 'node:http';
import { createLogger } from '../../src/adapters/telemetry/logger.js';
import { AdminClient, postJson } from '../../kit/admin.js';
import { startService } from '../support/service.js';
import { sleep } from '../../kit/wait.js';

describe('graceful shutdown', () => {
  it('on SIGTERM turns not-ready, finishes every accepted request, and exits cleanly within the bound', async () => {
    const service = await startService({ mode: 'real', env: { SHUTDOWN_TIMEOUT_MS: '4000', RATE_LIMIT_TOKEN_POINTS: '1000000' } });
    try {
      const admin = new AdminClient(service);
      const { platform, agent } = await admin.seed();
      const body = JSON.stringify({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id });
      expect((await postJson(`${service.publicUrl}/api/v1/auth/token`, JSON.parse(body))).status).toBe(200);

      // Keep-alive connections opened before the signal, so "accepted" is well defined.
      const agentPool = new http.Agent({ keepAlive: true, maxSockets: 16 });
      const { port } = new URL(service.publicUrl);
      const post = () =>
        new Promise<number>((resolve, reject) => {
          const req = http.request(
            { host: '127.0.0.1', port, path: '/api/v1/auth/token', method: 'POST', agent: agentPool, headers: { 'content-type': 'application/json' } },
            (res) => {
              res.resume();
              res.on('end', () => resolve(res.statusCode!));
              res.on('error', reject);
            },
          );
          req.on('error', reject);
          req.end(body);
        });
      let signalled = 0;
      const results: { startedBeforeSignal: boolean; status: number | string }[] = [];
      // A safety net only: after the signal each worker stops at its first refused connection.
      const deadline = Date.now() + 60_000;
      const worker = async () => {
        while (Date.now() < deadline) {
          const startedBeforeSignal = signalled === 0;
          try {
            results.push({ startedBeforeSignal, status: await post() });
          } catch (error) {
            results.push({ startedBeforeSignal, status: (error as { code?: string }).code ?? 'error' });
            if (!startedBeforeSignal) return; // the listener is gone: this worker is done
          }
        }
      };
      const load = Promise.all(Array.from({ length: 16 }, worker));
      // The signal must land while tokens are being issued: wait until the load is really flowing.
      while (results.filter((r) => r.status === 200).length < 50) await sleep(20);
      const readyBefore = (await fetch(`${service.adminUrl}/readyz`)).status;
      signalled = Date.now();
      service.process.kill('SIGTERM');
      // The signal is handled on the service's next event-loop turn: a /readyz already on its way may still
      // say 200. Not-ready must follow promptly, though (or the listener is already gone).
      const notReadyBy = Date.now() + 2000;
      let readyAfter: number | string = 200;
      while (readyAfter === 200 && Date.now() < notReadyBy) {
        readyAfter = await fetch(`${service.adminUrl}/readyz`).then((r) => r.status, () => 'closed');
        if (readyAfter === 200) await sleep(20);
      }
      const exit = await service.stop('SIGTERM');
      const exitedAfterMs = Date.now() - signalled;
      await load;
      agentPool.destroy();

      expect(readyBefore).toBe(200);
      expect([503, 'closed']).toContain(readyAfter);
      const before = results.filter((r) => r.startedBeforeSignal);
      expect(before.length).toBeGreaterThan(20);
      expect(before.filter((r) => r.status !== 200)).toEqual([]);
      expect(exit.code).toBe(0);
      expect(exitedAfterMs).toBeLessThan(4000 + 2000);
      expect(service.output()).toContain('"msg":"stopped"');
    } finally {
      await service.dispose();
    }
  });
});

describe('cluster mode', () => {
  it('runs WORKERS processes on the shared ports and answers /metrics with counters summed across them', async () => {
    const service = await startService({ mode: 'real', env: { WORKERS: '2', SIGN_THREADS: '1', ARGON2_THREADS: '1' } });
    try {
      // The harness returns once one process is ready; wait for both.
      const readyPids = () => {
        const pids = new Set<number>();
        for (const line of service.output().split('\n')) {
          const match = /"pid":(\d+).*"msg":"agent credential exchange ready"/.exec(line);
          if (match) pids.add(Number(match[1]));
        }
        return pids;
      };
      for (let i = 0; i < 300 && readyPids().size < 2; i++) await sleep(100);
      const pids = readyPids();
      expect(pids.size).toBe(2);
      // Separate connections spread over the processes (SO_REUSEPORT).
      for (let i = 0; i < 40; i++) {
        const response = await fetch(`${service.publicUrl}/.well-known/jwks.json`, { headers: { connection: 'close' } });
        expect(response.status).toBe(200);
        await response.arrayBuffer();
      }
      // Whichever process answers the scrape, it reports the sum over both.
      for (let i = 0; i < 3; i++) {
        const text = await (await fetch(`${service.adminUrl}/metrics`, { headers: { connection: 'close' } })).text();
        const match = /ace_http_requests_total\{route="jwks",method="GET",status="200"\} (\d+)/.exec(text);
        expect(Number(match?.[1])).toBe(40);
        expect(text).toMatch(/^ace_ready 1$/m); // min over processes, not a sum
      }
      // A process dies: the primary replaces it, and scrapes keep answering meanwhile (the process that
      // is starting is not asked).
      process.kill([...pids][0], 'SIGKILL');
      const answered: number[] = [];
      for (let i = 0; i < 10 && answered.length < 5; i++) {
        try {
          const scrape = await fetch(`${service.adminUrl}/metrics`, { headers: { connection: 'close' } });
          answered.push(scrape.status);
          await scrape.text();
        } catch {
          // A connection queued on the killed process's socket is reset by the kernel: retry.
        }
        await sleep(200);
      }
      expect(answered).toEqual([200, 200, 200, 200, 200]);
      for (let i = 0; i < 300 && readyPids().size < 3; i++) await sleep(100);
      expect(readyPids().size).toBe(3); // the replacement started
      expect(service.output()).toContain('worker died; starting a replacement');
      const exit = await service.stop('SIGTERM');
      expect(exit.code).toBe(0);
    } finally {
      await service.dispose();
    }
  });
});

/** A logger writing into memory, as the service's logger writes to stdout. */
function captureLogger() {
  const chunks: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  return { chunks, logger: createLogger('info', sink) };
}

describe('logs', () => {
  it('writes one structured access line per request with request id, route, status and latency', async () => {
    const service = await startService({ mode: 'embedded', env: { ACCESS_LOG: 'true' } });
    try {
      const response = await fetch(`${service.publicUrl}/.well-known/jwks.json`, { headers: { 'x-request-id': 'trace-abc-123' } });
      expect(response.headers.get('x-request-id')).toBe('trace-abc-123');
      const missing = await fetch(`${service.publicUrl}/nope`);
      const generatedId = missing.headers.get('x-request-id')!;
      expect(generatedId).toMatch(/^[0-9a-f-]{36}$/);
      await service.stop('SIGTERM'); // its whole output, read to the end
      const lines = service
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l));
      const access = lines.find((l) => l.reqId === 'trace-abc-123');
      expect(access).toMatchObject({ msg: 'request', route: 'jwks', method: 'GET', status: 200 });
      expect(typeof access.ms).toBe('number');
      expect(lines.find((l) => l.reqId === generatedId)).toMatchObject({ route: 'unmatched', status: 404 });
    } finally {
      await service.dispose();
    }
  });

  it('redacts secrets, authorization headers and key material', () => {
    const { chunks, logger } = captureLogger();
    logger.info({
      secret: 'S3CRET-VALUE',
      body: { secret: 'NESTED-SECRET' },
      authorization: 'Bearer ADMIN-TOKEN',
      headers: { authorization: 'Bearer HEADER-TOKEN' },
      privateKeyPem: '-----BEGIN PRIVATE KEY-----',
      key: { privateKey: 'PK-MATERIAL' },
      admin_token: 'ADMIN-TOKEN-2',
    });
    const text = chunks.join('');
    for (const leaked of ['S3CRET-VALUE', 'NESTED-SECRET', 'ADMIN-TOKEN', 'HEADER-TOKEN', 'BEGIN PRIVATE KEY', 'PK-MATERIAL', 'ADMIN-TOKEN-2']) {
      expect(text).not.toContain(leaked);
    }
    expect(text).toContain('[redacted]');
  });

  it('redacts sensitive keys at any depth: request bodies, nested objects, arrays, child bindings, any spelling', () => {
    const { chunks, logger } = captureLogger();
    const circular: Record<string, unknown> = { name: 'loop', password: 'LOOP-PASSWORD' };
    circular.self = circular;
    logger.info({ req: { body: { api_key_id: 'agnt_kid_visible', secret: 'BODY-SECRET' } } }, 'token request');
    logger.info({ a: { b: { c: { secret: 'ABC-SECRET', d: { e: { f: { g: { authorization: 'Bearer DEEP-TOKEN' } } } } } } } });
    logger.info({ list: [{ secret: 'ARRAY-SECRET' }, [{ password: 'NESTED-ARRAY-PASSWORD' }], 'plain'] });
    logger.info({ headers: { Authorization: 'Bearer MIXED-CASE', 'X-Admin-Token': 'x', Cookie: 'session=COOKIE-VALUE' } });
    logger.info({ config: { adminToken: 'CAMEL-ADMIN-TOKEN', databaseUrl: 'postgres://u:DB-PASSWORD@h/db', keyEncryptionKey: 'KEK-VALUE' } });
    logger.info({ response: { access_token: 'eyJ.ACCESS.TOKEN' }, circular });
    logger.child({ ctx: { deep: { secret: 'BINDING-SECRET' } } }).info({ ok: true }, 'child');
    const text = chunks.join('');
    for (const leaked of [
      'BODY-SECRET', 'ABC-SECRET', 'DEEP-TOKEN', 'ARRAY-SECRET', 'NESTED-ARRAY-PASSWORD', 'MIXED-CASE', 'COOKIE-VALUE',
      'CAMEL-ADMIN-TOKEN', 'DB-PASSWORD', 'KEK-VALUE', 'ACCESS.TOKEN', 'LOOP-PASSWORD', 'BINDING-SECRET',
    ]) {
      expect(text, leaked).not.toContain(leaked);
    }
    // Everything else is kept, so the logs stay useful.
    const records = text.trim().split('\n').map((line) => JSON.parse(line));
    expect(records[0]).toMatchObject({ msg: 'token request', req: { body: { api_key_id: 'agnt_kid_visible', secret: '[redacted]' } } });
    expect(records[2].list).toEqual([{ secret: '[redacted]' }, [{ password: '[redacted]' }], 'plain']);
    expect(records[5].circular.name).toBe('loop');
    expect(records[6]).toMatchObject({ msg: 'child', ok: true, ctx: { deep: { secret: '[redacted]' } } });
  });
});
