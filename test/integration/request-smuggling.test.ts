// Request smuggling at the public port, over raw sockets. uWS frames leniently (the first of two
// Content-Length fields wins and the rest of the bytes become a second request; xchunked, chunkedx,
// identity and "chunked, gzip" are decoded as chunked), so a front proxy that frames differently would
// see other requests than we do. Every ambiguous framing must be refused before any handler work, and
// nothing sent after it on the connection may be served.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { contractErrorProblem, rawExchange, type RawResult } from '../support/faults.js';
import { metricSum } from '../../kit/metrics.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

describe('request smuggling', () => {
  let service: ServiceHandle;
  let platform: PlatformRecord;
  let agent: AgentCredentials;
  let port: number;
  let credentials: string;

  beforeAll(async () => {
    service = await startService({ mode: 'real', env: { RATE_LIMIT_AUTH_FAIL_POINTS: '1000000', RATE_LIMIT_TOKEN_POINTS: '1000000' } });
    ({ platform, agent } = await new AdminClient(service).seed());
    port = Number(new URL(service.publicUrl).port);
    credentials = JSON.stringify({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id });
  });
  afterAll(async () => {
    await service?.dispose();
  });

  /** Handler work seen from outside: token outcomes and requests answered per route. */
  const handlerWork = async () => {
    const text = await (await fetch(`${service.adminUrl}/metrics`)).text();
    return {
      tokens: metricSum(text, 'ace_tokens_issued_total'),
      tokenRoute: metricSum(text, 'ace_http_requests_total', { route: 'token' }),
      unmatched: metricSum(text, 'ace_http_requests_total', { route: 'unmatched' }),
    };
  };

  const head = (framing: string[]) => `POST /api/v1/auth/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${framing.map((f) => `${f}\r\n`).join('')}\r\n`;
  const chunked = (body: string) => `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
  const smuggledGet = 'GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n';
  const secondToken = () => `${head([`Content-Length: ${credentials.length}`])}${credentials}`;

  // Each: the framing fields and the body bytes that follow the head (as the lenient parser reads them).
  const cases = (): [string, string[], () => string, number][] => [
    ['two different Content-Length', ['Content-Length: 2', 'Content-Length: 45'], () => credentials, 400],
    ['two equal Content-Length', [`Content-Length: ${credentials.length}`, `Content-Length: ${credentials.length}`], () => credentials, 400],
    ['Content-Length list', [`Content-Length: ${credentials.length}, ${credentials.length}`], () => credentials, 400],
    ['Content-Length with chunked', [`Content-Length: ${credentials.length}`, 'Transfer-Encoding: chunked'], () => chunked(credentials), 400],
    ['chunked with Content-Length', ['Transfer-Encoding: chunked', `Content-Length: ${credentials.length}`], () => chunked(credentials), 400],
    ['Transfer-Encoding: xchunked', ['Transfer-Encoding: xchunked'], () => chunked(credentials), 501],
    ['Transfer-Encoding: chunkedx', ['Transfer-Encoding: chunkedx'], () => chunked(credentials), 501],
    ['Transfer-Encoding: identity', ['Transfer-Encoding: identity'], () => chunked(credentials), 501],
    ['Transfer-Encoding: chunked, gzip', ['Transfer-Encoding: chunked, gzip'], () => chunked(credentials), 501],
    ['Transfer-Encoding: gzip, chunked', ['Transfer-Encoding: gzip, chunked'], () => chunked(credentials), 501],
    ['Transfer-Encoding twice', ['Transfer-Encoding: chunked', 'Transfer-Encoding: chunked'], () => chunked(credentials), 400],
  ];

  /** Our refusal in the contract shape, or the HTTP core's own 400 page for what it refuses itself. */
  const expectRefused = (result: RawResult, expected: number, what: string) => {
    const label = `${what}\n<- ${result.bytes.toString('latin1').slice(0, 400)}`;
    expect(result.responses, label).toHaveLength(1);
    const [answer] = result.responses;
    if (answer.headers['x-request-id'] === undefined) {
      // Refused by uWS before any handler (Content-Length with Transfer-Encoding, Content-Length lists).
      expect(answer.status, label).toBe(400);
    } else {
      expect(answer.status, label).toBe(expected);
      expect(answer.headers['x-request-id'], label).toMatch(REQUEST_ID);
      expect(contractErrorProblem(answer.status, answer.headers['content-type'], answer.body), label).toBeNull();
    }
    expect(answer.headers.connection, label).toBe('close');
    expect(result.closedByServer, `${label}: connection closed`).toBe(true);
  };

  it('refuses each ambiguous framing with 400 or 501 and closes the connection, doing no handler work', async () => {
    const before = await handlerWork();
    for (const [name, framing, body, status] of cases()) {
      // Wait for the close, not only the answer (responses: 2 never comes).
      const result = await rawExchange(port, head(framing) + body(), { responses: 2, timeoutMs: 5000 });
      expectRefused(result, status, name);
    }
    expect(await handlerWork()).toEqual(before);
  });

  it('serves nothing pipelined behind an ambiguous request: no GET /smuggled, no second token', async () => {
    const before = await handlerWork();
    for (const [name, framing, body] of cases()) {
      for (const [follower, after] of [['GET /smuggled', smuggledGet], ['a second token request', secondToken()]]) {
        // Everything in one write, as a front proxy reusing its connection would forward it.
        const result = await rawExchange(port, head(framing) + body() + after, { responses: 2, timeoutMs: 5000 });
        const label = `${name} + ${follower}\n<- ${result.bytes.toString('latin1').slice(0, 400)}`;
        // At most the refusal (when the core refuses first, or our answer went out); never a second answer.
        expect(result.responses.length, label).toBeLessThanOrEqual(1);
        for (const answer of result.responses) expect([400, 501], label).toContain(answer.status);
        expect(result.bytes.toString('latin1'), label).not.toContain('access_token');
        expect(result.closedByServer, `${label}: connection closed`).toBe(true);
      }
    }
    // Neither the refused requests nor what followed them reached a handler: no token outcome at all.
    expect(await handlerWork()).toEqual(before);
  });

  it('keeps honest framing working: Content-Length, chunked, and pipelined requests on one connection', async () => {
    const byLength = await rawExchange(port, secondToken());
    expect(byLength.responses[0]?.status).toBe(200);
    const byChunks = await rawExchange(port, head(['Transfer-Encoding: chunked']) + chunked(credentials));
    expect(byChunks.responses[0]?.status).toBe(200);
    // Pipelined behind answers given at once. (uWS closes a connection on which a request arrives while
    // the previous answer is still being worked on: see docs/http-front-end.md.)
    const pipelined = await rawExchange(port, `GET /.well-known/jwks.json HTTP/1.1\r\nHost: x\r\n\r\n${smuggledGet}${secondToken()}`, { responses: 3 });
    expect(pipelined.responses.map((r) => r.status)).toEqual([200, 404, 200]);
  });
});
