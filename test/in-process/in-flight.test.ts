// Each request completes exactly once, whatever the HTTP core calls: a second completion (uWS calling
// onAborted after an answer) must not count twice, or the in-flight count goes negative and graceful
// shutdown waits its whole bound with nothing in flight.
import { describe, expect, it } from 'vitest';
import { InFlight } from '../../src/adapters/http/in-flight.js';
import { HttpServer } from '../../src/adapters/http/server.js';
import client from 'prom-client';
import { HttpMetrics } from '../../src/adapters/http/http-metrics.js';
import { createLogger } from '../../src/adapters/telemetry/logger.js';
import { json } from '../../src/adapters/http/types.js';
import { exchangeOnOneConnection } from '../support/faults.js';

describe('InFlight', () => {
  it('counts a request once when it is answered and then reported aborted', async () => {
    const inFlight = new InFlight();
    const request = inFlight.begin();
    expect(inFlight.size).toBe(1);
    expect(request.complete()).toBe(true); // the answer
    expect(request.complete()).toBe(false); // onAborted after the answer
    expect(request.done).toBe(true);
    expect(inFlight.size).toBe(0);
    // Nothing in flight: idle at once, not at the deadline.
    let idle = false;
    void inFlight.idle(60_000).then(() => (idle = true));
    await Promise.resolve();
    expect(idle).toBe(true);
  });

  it('wakes idle waiters when the last request completes, and only then', async () => {
    const inFlight = new InFlight();
    const a = inFlight.begin();
    const b = inFlight.begin();
    let idle = false;
    const waiting = inFlight.idle(60_000).then(() => (idle = true));
    a.complete();
    a.complete();
    await Promise.resolve();
    expect(idle).toBe(false); // b is still in flight: a's second completion did not count
    b.complete();
    await waiting;
    expect(inFlight.size).toBe(0);
  });
});

/** The declaration fields the server does not read here. */
const plain = { summary: 'test route', auth: 'none', audit: { kind: 'none' }, responses: {} } as const;

describe('HttpServer on one keep-alive connection', () => {
  it('HEAD and 304 leave the connection usable and nothing in flight', async () => {
    const server = new HttpServer({
      routes: [
        { ...plain, method: 'GET', path: '/doc', name: 'doc', handler: () => json(200, { hello: 'world' }, { ETag: '"v1"' }) },
        { ...plain, method: 'GET', path: '/cached', name: 'cached', handler: () => ({ status: 304, headers: { ETag: '"v1"' }, representationLength: 17 }) },
      ],
      name: 'test',
      maxBodyBytes: 1024,
      proxy: { hops: 0 },
      metrics: new HttpMetrics({ registry: new client.Registry() }),
      logger: createLogger('silent'),
      accessLog: false,
    });
    const port = await server.listen('127.0.0.1', 0);
    try {
      const get = 'GET /doc HTTP/1.1\r\nHost: x\r\n\r\n';
      const answers = await exchangeOnOneConnection(port, ['HEAD /doc HTTP/1.1\r\nHost: x\r\n\r\n', get, 'GET /cached HTTP/1.1\r\nHost: x\r\n\r\n', get, 'HEAD /nowhere HTTP/1.1\r\nHost: x\r\n\r\n', get]);
      expect(answers.map((a) => a.status)).toEqual([200, 200, 304, 200, 404, 200]);
      // HEAD and 304 announce the representation's length, once.
      const lengths = (i: number) => answers[i].headerLines.filter((l) => /^content-length:/i.test(l));
      expect(lengths(0)).toEqual([`Content-Length: ${'{"hello":"world"}'.length}`]);
      expect(lengths(2)).toEqual(['Content-Length: 17']);
      expect(answers[1].body.toString()).toBe('{"hello":"world"}');
      // Give uWS the chance to report a late abort for the bodiless answers; the count must stay at 0.
      await new Promise((r) => setTimeout(r, 50));
      expect(server.requestsInFlight).toBe(0);
    } finally {
      server.closeAll();
    }
  });
});
