// Fault-injection helpers for the reliability and security suites: a private redis-server that can be
// killed and restarted, a TCP proxy in front of Postgres that can refuse or black-hole traffic, a raw
// HTTP/1.1 client over node:net (for what fetch will not send), and small readers for metrics and RSS.
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { Redis } from 'ioredis';
import { ERRORS } from '../../src/core/errors.js';
import { ERROR_STATUS } from '../../src/adapters/http/errors.js';
import { freePort } from '../../kit/ports.js';
import { memoryBytes, processTree } from '../../kit/proc.js';
import { sleep, waitFor } from '../../kit/wait.js';

// ---------------------------------------------------------------------------------------------------
// A private redis-server (never the shared one on 6379: other suites run against it in parallel).

export interface RedisServer {
  port: number;
  url: string;
  /** Starts (or restarts) the server on the same port and waits until it answers PING. */
  start(): Promise<void>;
  /** SIGKILL: the abrupt kind of outage (no FIN from a clean shutdown first matters little here). */
  kill(): Promise<void>;
  /** A short-lived client of this server. */
  client(): Redis;
  running(): boolean;
}

const liveChildren = new Set<ChildProcess>();
process.once('exit', () => liveChildren.forEach((c) => c.kill('SIGKILL')));

export async function startRedisServer(): Promise<RedisServer> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const server: RedisServer = {
    port,
    url: `redis://127.0.0.1:${port}`,
    running: () => child !== undefined && child.exitCode === null && child.signalCode === null,
    async start() {
      if (server.running()) return;
      const proc = spawn(
        'redis-server',
        ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      proc.stdout!.resume();
      proc.stderr!.resume();
      liveChildren.add(proc);
      proc.once('exit', () => liveChildren.delete(proc));
      child = proc;
      await waitFor(`redis-server on ${port}`, async () => {
        if (!server.running()) throw new Error('redis-server exited');
        const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
        probe.on('error', () => {});
        try {
          await probe.connect();
          return (await probe.ping()) === 'PONG';
        } finally {
          probe.disconnect();
        }
      });
    },
    async kill() {
      const proc = child;
      if (!proc || !server.running()) return;
      const exited = new Promise((resolve) => proc.once('exit', resolve));
      proc.kill('SIGKILL');
      await exited;
    },
    client() {
      const redis = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 });
      redis.on('error', () => {});
      return redis;
    },
  };
  await server.start();
  return server;
}

/** Every key under `prefix` with its value(s) as text, whatever the Redis type. */
export async function dumpRedis(redis: Redis, prefix: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
    cursor = next;
    for (const key of keys) {
      const type = await redis.type(key);
      let value: string;
      if (type === 'string') value = (await redis.get(key)) ?? '';
      else if (type === 'hash') value = JSON.stringify(await redis.hgetall(key));
      else if (type === 'list') value = JSON.stringify(await redis.lrange(key, 0, -1));
      else if (type === 'set') value = JSON.stringify(await redis.smembers(key));
      else if (type === 'zset') value = JSON.stringify(await redis.zrange(key, '0', '-1', 'WITHSCORES'));
      else value = `<${type}>`;
      out.set(key, value);
    }
  } while (cursor !== '0');
  return out;
}

// ---------------------------------------------------------------------------------------------------
// A TCP proxy between the service and Postgres: "down" without touching the shared server.

type ProxyMode = 'forward' | 'refuse' | 'blackhole';

interface Pair {
  client: net.Socket;
  upstream?: net.Socket;
  /** Bytes were dropped on this pair: the protocol stream is broken, so it must not be resumed. */
  poisoned: boolean;
}

export class TcpProxy {
  private server = net.createServer((socket) => this.accept(socket));
  private pairs = new Set<Pair>();
  private mode: ProxyMode = 'forward';
  port = 0;
  /** Connections accepted while forwarding (to show the service reconnected by itself). */
  forwardedConnections = 0;

  constructor(
    private readonly targetPort: number,
    private readonly targetHost = '127.0.0.1',
  ) {}

  async listen(): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => resolve());
    });
    this.port = (this.server.address() as net.AddressInfo).port;
    return this.port;
  }

  /** Postgres is "down": every open connection is reset and new ones are reset at once. */
  refuse(): void {
    this.mode = 'refuse';
    for (const pair of this.pairs) this.destroy(pair);
  }

  /** Postgres "hangs": connections stay open (new ones are accepted) but no byte gets through. */
  blackhole(): void {
    this.mode = 'blackhole';
  }

  /** Postgres is back. Black-holed connections are reset (their protocol state is lost); new ones forward. */
  forward(): void {
    this.mode = 'forward';
    for (const pair of this.pairs) if (pair.poisoned) this.destroy(pair);
  }

  async close(): Promise<void> {
    for (const pair of this.pairs) this.destroy(pair);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private destroy(pair: Pair): void {
    pair.client.resetAndDestroy();
    pair.upstream?.destroy();
    this.pairs.delete(pair);
  }

  private accept(client: net.Socket): void {
    client.on('error', () => {});
    if (this.mode === 'refuse') {
      client.resetAndDestroy();
      return;
    }
    const pair: Pair = { client, poisoned: this.mode === 'blackhole' };
    this.pairs.add(pair);
    client.on('close', () => {
      pair.upstream?.destroy();
      this.pairs.delete(pair);
    });
    if (pair.poisoned) {
      client.on('data', () => {}); // swallow forever
      return;
    }
    this.forwardedConnections++;
    const upstream = net.connect(this.targetPort, this.targetHost);
    pair.upstream = upstream;
    upstream.on('error', () => client.destroy());
    upstream.on('close', () => client.destroy());
    // Chunk by chunk rather than pipe(), so a black-hole can start in the middle of a connection.
    const relay = (from: net.Socket, to: net.Socket) =>
      from.on('data', (chunk) => {
        if (this.mode !== 'forward') {
          pair.poisoned = true;
          return;
        }
        if (!to.write(chunk)) {
          from.pause();
          to.once('drain', () => from.resume());
        }
      });
    relay(client, upstream);
    relay(upstream, client);
  }
}

// ---------------------------------------------------------------------------------------------------
// Raw HTTP/1.1 over a socket: malformed requests, odd methods, truncated and slow bodies.

export interface RawResponse {
  status: number;
  statusLine: string;
  /** Header lines exactly as received, in order. */
  headerLines: string[];
  headers: Record<string, string>;
  body: Buffer;
}

export interface RawResult {
  responses: RawResponse[];
  /** The server closed the connection (FIN or reset) before our deadline. */
  closedByServer: boolean;
  timedOut: boolean;
  bytes: Buffer;
}

export interface RawOptions {
  timeoutMs?: number;
  /** Resolve as soon as this many complete responses arrived (default 1). */
  responses?: number;
  /** Responses to HEAD requests carry no body. */
  head?: boolean;
  host?: string;
}

export type RawPart = string | Buffer | { delayMs: number };

/** Sends `parts` (strings, buffers and pauses) and collects what comes back. */
export function rawExchange(port: number, parts: RawPart | RawPart[], options: RawOptions = {}): Promise<RawResult> {
  const list = Array.isArray(parts) ? parts : [parts];
  const want = options.responses ?? 1;
  return new Promise((resolve) => {
    const socket = net.connect(port, options.host ?? '127.0.0.1');
    let bytes = Buffer.alloc(0);
    let settled = false;
    const finish = (closedByServer: boolean, timedOut: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ responses: parseResponses(bytes, options.head).responses, closedByServer, timedOut, bytes });
    };
    const timer = setTimeout(() => finish(false, true), options.timeoutMs ?? 5000);
    socket.on('data', (chunk) => {
      bytes = Buffer.concat([bytes, chunk]);
      if (parseResponses(bytes, options.head).responses.length >= want) finish(false, false);
    });
    socket.on('close', () => finish(true, false));
    socket.on('error', () => finish(true, false));
    socket.once('connect', async () => {
      for (const part of list) {
        if (settled || socket.destroyed) return;
        if (typeof part === 'object' && !Buffer.isBuffer(part)) await sleep(part.delayMs);
        else await new Promise<void>((done) => socket.write(part, () => done()));
      }
    });
  });
}

/**
 * Sends `requests` one after the other on ONE connection, each once the previous answer is complete (a
 * client that reuses connections). Rejects if the server closes the connection or goes silent before
 * every request got its answer.
 */
export function exchangeOnOneConnection(port: number, requests: (string | Buffer)[], timeoutMs = 10_000): Promise<RawResponse[]> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const answers: RawResponse[] = [];
    let pending: Buffer = Buffer.alloc(0);
    const fail = (why: string) => {
      clearTimeout(timer);
      socket.destroy();
      reject(new Error(`${why} after ${answers.length} of ${requests.length} answers: ${JSON.stringify(answers.map((a) => a.statusLine))}`));
    };
    const timer = setTimeout(() => fail('no answer in time'), timeoutMs);
    const next = () => {
      if (answers.length < requests.length) return void socket.write(requests[answers.length]);
      clearTimeout(timer);
      socket.removeAllListeners('close');
      socket.destroy();
      resolve(answers);
    };
    socket.on('data', (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      const head = String(requests[answers.length]).startsWith('HEAD ');
      const { responses, rest } = parseResponses(pending, head);
      if (responses.length === 0) return;
      answers.push(responses[0]);
      pending = rest; // (nothing is pipelined: each request waits for the previous answer)
      next();
    });
    socket.on('close', () => fail('connection closed by the server'));
    socket.on('error', (error) => fail(`socket error ${(error as NodeJS.ErrnoException).code}`));
    socket.on('connect', next);
  });
}

/** Parses consecutive HTTP/1.1 responses framed by Content-Length (what uWS sends). */
export function parseResponses(bytes: Buffer, head = false): { responses: RawResponse[]; rest: Buffer } {
  const responses: RawResponse[] = [];
  let offset = 0;
  for (;;) {
    const end = bytes.indexOf('\r\n\r\n', offset);
    if (end < 0) break;
    const lines = bytes.subarray(offset, end).toString('latin1').split('\r\n');
    const statusLine = lines[0];
    const match = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
    if (!match) break;
    const headerLines = lines.slice(1);
    const headers: Record<string, string> = {};
    for (const line of headerLines) {
      const colon = line.indexOf(':');
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const status = Number(match[1]);
    if (status >= 100 && status < 200) {
      offset = end + 4; // interim answer (100 Continue): no body, the final answer follows
      continue;
    }
    const length = head || status === 304 || status === 204 ? 0 : Number(headers['content-length'] ?? 0);
    if (bytes.length < end + 4 + length) break;
    responses.push({ status, statusLine, headerLines, headers, body: bytes.subarray(end + 4, end + 4 + length) });
    offset = end + 4 + length;
  }
  return { responses, rest: bytes.subarray(offset) };
}

/** A request in HTTP/1.1 wire form. `body` may be bytes; Content-Length is added unless given or `noLength`. */
export function httpRequest(
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string | Buffer,
  options: { noLength?: boolean } = {},
): Buffer {
  const lines = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1'];
  const hasLength = Object.keys(headers).some((h) => h.toLowerCase() === 'content-length');
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  const payload = body === undefined ? Buffer.alloc(0) : Buffer.isBuffer(body) ? body : Buffer.from(body);
  if (body !== undefined && !hasLength && !options.noLength) lines.push(`Content-Length: ${payload.length}`);
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), payload]);
}

// ---------------------------------------------------------------------------------------------------
// The error contract.

const CATALOG: Record<string, { status: number; detail: string }> = Object.fromEntries(
  Object.entries(ERRORS).map(([code, { detail }]) => [code, { status: ERROR_STATUS[code as keyof typeof ERROR_STATUS], detail }]),
);

/**
 * Null when `status`/`contentType`/`body` is a well-formed contract error: JSON with exactly
 * {detail, error_code}, a catalog code whose status is `status`. Otherwise the reason.
 */
export function contractErrorProblem(status: number, contentType: string | undefined, body: Buffer | string): string | null {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  if (!/^application\/json/.test(contentType ?? '')) return `content-type ${contentType} for ${status}: ${text.slice(0, 200)}`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return `body is not JSON: ${text.slice(0, 200)}`;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return `body is not an object: ${text.slice(0, 200)}`;
  const keys = Object.keys(parsed).sort().join(',');
  if (keys !== 'detail,error_code') return `body keys are ${keys}`;
  const { detail, error_code: code } = parsed as { detail: unknown; error_code: unknown };
  if (typeof detail !== 'string' || detail.length === 0) return 'detail is not a non-empty string';
  if (typeof code !== 'string' || !(code in CATALOG)) return `error_code ${String(code)} is not in the catalog`;
  if (CATALOG[code].status !== status) return `error_code ${code} has status ${CATALOG[code].status}, answered ${status}`;
  return null;
}

// ---------------------------------------------------------------------------------------------------
// Metrics and memory.

/** Statuses >= 500 other than 503 that the service counted, as "route method status" strings. */
export function serverErrorsIn(metricsText: string): string[] {
  return [...metricsText.matchAll(/^ace_http_requests_total\{route="([^"]*)",method="([^"]*)",status="(5\d\d)"\} (\S+)/gm)]
    .filter((m) => m[3] !== '503' && Number(m[4]) > 0)
    .map((m) => `${m[1]} ${m[2]} ${m[3]} x${m[4]}`);
}

/** Resident memory (MiB) of the process and its descendants (cluster workers, if any). */
export function rssMiB(pid: number): number {
  return processTree(pid).reduce((sum, p) => sum + memoryBytes(p), 0) / (1024 * 1024);
}
