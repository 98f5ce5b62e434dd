// A hostile HTTP proxy for the revocation feed, between a platform's middleware and the service: what a
// load balancer or a middlebox on the path can do to the feed without breaking TLS-free HTTP. Modes (each
// can be switched at any time):
// - `stripSets`: the signed stream heads pass, every other SET is dropped: from RFC 8936 poll answers
//   (the JSON body rewritten) and from the WebSocket (text frames filtered; the proxy strips
//   Sec-WebSocket-Extensions from the upgrade so that frames are never compressed and can be read);
// - `swallowUpgrades`: a WebSocket upgrade is accepted on TCP and never answered (the socket held open).
// Everything else (JWKS, token requests, other paths) is forwarded as it is.
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';

export interface FeedProxyMode {
  stripSets: boolean;
  swallowUpgrades: boolean;
}

export interface FeedProxyCounts {
  /** Revocation SETs dropped (poll answers and socket frames). */
  setsStripped: number;
  /** Stream heads let through while stripping. */
  headsPassed: number;
  upgradesSwallowed: number;
  upgradesPassed: number;
}

export interface FeedProxy {
  /** Base URL to give the middleware as its serviceUrl. */
  url: string;
  set(mode: Partial<FeedProxyMode>): void;
  readonly counts: FeedProxyCounts;
  close(): Promise<void>;
}

/** The jti of a compact JWS SET, or undefined when it is not one. */
function jtiOf(jws: string): string | undefined {
  const parts = jws.trim().split('.');
  if (parts.length !== 3) return undefined;
  try {
    const jti = (JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as { jti?: unknown }).jti;
    return typeof jti === 'string' ? jti : undefined;
  } catch {
    return undefined; // not a JWS payload: not a SET, passed as it is
  }
}

const isHead = (jti: string | undefined) => jti !== undefined && jti.endsWith(':head');

export async function startFeedProxy(target: string, initial: Partial<FeedProxyMode> = {}): Promise<FeedProxy> {
  const upstream = new URL(target);
  const mode: FeedProxyMode = { stripSets: false, swallowUpgrades: false, ...initial };
  const counts: FeedProxyCounts = { setsStripped: 0, headsPassed: 0, upgradesSwallowed: 0, upgradesPassed: 0 };
  const held = new Set<Duplex>();
  const hold = (socket: Duplex) => {
    held.add(socket);
    socket.on('close', () => held.delete(socket));
    // A peer that goes away is the end of that connection, nothing more to do.
    socket.on('error', () => socket.destroy());
  };

  /** A poll answer with only the head SET left. */
  const stripAnswer = (body: Buffer): Buffer => {
    let answer: { sets?: Record<string, string> };
    try {
      answer = JSON.parse(body.toString('utf8')) as { sets?: Record<string, string> };
    } catch {
      return body; // not JSON (an error page): passed as it is
    }
    if (!answer || typeof answer.sets !== 'object' || answer.sets === null) return body;
    const sets: Record<string, string> = {};
    for (const [jti, jws] of Object.entries(answer.sets)) {
      if (isHead(jti)) {
        sets[jti] = jws;
        counts.headsPassed++;
      } else counts.setsStripped++;
    }
    return Buffer.from(JSON.stringify({ ...answer, sets }));
  };

  const server = http.createServer((req, res) => {
    const headers = { ...req.headers, host: upstream.host };
    delete headers['accept-encoding']; // bodies the proxy can read and rewrite
    const forward = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers }, (answer) => {
      const rewrite = mode.stripSets && req.method === 'POST' && /\/revocations$/.test((req.url ?? '').split('?')[0]!) && answer.statusCode === 200;
      if (!rewrite) {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        return;
      }
      const chunks: Buffer[] = [];
      answer.on('data', (chunk: Buffer) => chunks.push(chunk));
      answer.on('end', () => {
        const body = stripAnswer(Buffer.concat(chunks));
        const out = { ...answer.headers, 'content-length': String(body.length) };
        delete out['transfer-encoding'];
        res.writeHead(200, out);
        res.end(body);
      });
    });
    forward.on('error', () => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
    req.pipe(forward);
  });

  server.on('upgrade', (req: http.IncomingMessage, client: Duplex, head: Buffer) => {
    hold(client);
    if (mode.swallowUpgrades) {
      counts.upgradesSwallowed++;
      return; // accepted on TCP, never answered, held until the client gives up or the proxy closes
    }
    counts.upgradesPassed++;
    const service = net.connect(Number(upstream.port), upstream.hostname);
    hold(service);
    const lines = [`${req.method} ${req.url} HTTP/1.1`];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i]!;
      if (name.toLowerCase() === 'sec-websocket-extensions') continue; // no compression: frames stay readable
      lines.push(`${name}: ${name.toLowerCase() === 'host' ? upstream.host : req.rawHeaders[i + 1]}`);
    }
    service.write(`${lines.join('\r\n')}\r\n\r\n`);
    if (head.length > 0) service.write(head);
    client.pipe(service);
    const end = () => {
      client.destroy();
      service.destroy();
    };
    client.on('close', end);
    service.on('close', end);

    // Service to client: the HTTP answer as it is, then frame by frame (unmasked, server side).
    let buffer = Buffer.alloc(0);
    let answered = false;
    service.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      if (!answered) {
        const endOfHead = buffer.indexOf('\r\n\r\n');
        if (endOfHead < 0) return;
        client.write(buffer.subarray(0, endOfHead + 4));
        buffer = buffer.subarray(endOfHead + 4);
        answered = true;
      }
      for (;;) {
        const frame = nextFrame(buffer);
        if (!frame) return;
        buffer = buffer.subarray(frame.length);
        const raw = frame.bytes;
        if (mode.stripSets && frame.opcode === 1) {
          if (isHead(jtiOf(frame.payload.toString('utf8')))) counts.headsPassed++;
          else {
            counts.setsStripped++;
            continue;
          }
        }
        client.write(raw);
      }
    });
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    set: (next) => Object.assign(mode, next),
    counts,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of held) socket.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** One complete WebSocket frame at the start of `buffer` (RFC 6455 §5.2), or undefined while incomplete. */
function nextFrame(buffer: Buffer): { opcode: number; payload: Buffer; bytes: Buffer; length: number } | undefined {
  if (buffer.length < 2) return undefined;
  const opcode = buffer[0]! & 0x0f;
  const masked = (buffer[1]! & 0x80) !== 0;
  let length = buffer[1]! & 0x7f;
  let offset = 2;
  if (length === 126) {
    if (buffer.length < 4) return undefined;
    length = buffer.readUInt16BE(2);
    offset = 4;
  } else if (length === 127) {
    if (buffer.length < 10) return undefined;
    length = Number(buffer.readBigUInt64BE(2));
    offset = 10;
  }
  const maskOffset = offset;
  if (masked) offset += 4;
  if (buffer.length < offset + length) return undefined;
  let payload = buffer.subarray(offset, offset + length);
  if (masked) {
    const mask = buffer.subarray(maskOffset, maskOffset + 4);
    payload = Buffer.from(payload.map((byte, i) => byte ^ mask[i % 4]!));
  }
  return { opcode, payload, bytes: buffer.subarray(0, offset + length), length: offset + length };
}
