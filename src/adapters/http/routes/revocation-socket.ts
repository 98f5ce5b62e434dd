// The revocation feed's WebSocket push: the same SETs as the poll, one uWS topic per platform
// (revocation-topics.ts). The upgrade and the sockets are served by uWS's WebSocket handler, beside
// HttpServer's request lifecycle (docs/http-front-end.md); the route is declared here for the document.
import { STATUS_CODES } from 'node:http';
import * as uWS from 'uWebSockets.js';
import { Type } from '@sinclair/typebox';
import { ServiceError, toServiceError, unavailable } from '../../../core/errors.js';
import type { FeedCredentialService } from '../../../core/revocation/feed-credential-service.js';
import type { RevocationTransmitter } from '../../../core/revocation/transmitter.js';
import type { RevocationMetrics } from './revocation-metrics.js';
import type { SocketTopics } from './revocation-topics.js';
import type { Logger } from '../../telemetry/index.js';
import { fixedHeader, refusals } from '../responses.js';
import { CLOSE_CREDENTIAL_REVOKED, FEED_SUBPROTOCOL, FEED_TOKEN_SUBPROTOCOL_PREFIX, feedSocketPath } from '@agent-credential-exchange/protocol/feed-document';
import { refusalReply, type RouteDeclaration } from '../types.js';
import { bearerToken, FEED_AUTH, FEED_PARAMS, feedUnauthorized, platformParam, SET_FORMAT } from './revocation-poll.js';

export const FEED_SOCKET_PATH = feedSocketPath(':platform_id');
const SEQ = /^(0|[1-9]\d{0,15})$/;
/** Seconds a receiver refused by a WebSocket cap waits (it polls meanwhile). */
const PER_ADDRESS_RETRY_AFTER = 30;
const TOTAL_RETRY_AFTER = 10;

const FEED_QUERY = Type.Object({
  since: Type.Optional(Type.Integer({ minimum: 0, default: 0, description: 'Sequence number already applied: SETs above it are sent.' })),
});

/** The push side, served by attachRevocationSockets (uWS's WebSocket handler), declared for the document. */
export const revocationSocketRoute = {
  method: 'GET', path: FEED_SOCKET_PATH, name: 'revocation_socket', operationId: 'subscribeRevocationFeed',
  summary: 'WebSocket push of the revocation SETs',
  description:
    'A WebSocket upgrade (RFC 6455: send Connection: Upgrade, Upgrade: websocket, Sec-WebSocket-Key and ' +
    'Sec-WebSocket-Version: 13). Once open, the server sends text messages only, each one compact SET: first the ' +
    'SETs above since and the signed stream head (the catch-up), then every new SET as it is appended, and the ' +
    're-signed stream head every REVOCATION_HEARTBEAT_SECONDS. The subscriber sends nothing (messages are ignored). ' +
    `The server closes with 1011 when the catch-up cannot be read. ${SET_FORMAT}`,
  params: FEED_PARAMS,
  query: FEED_QUERY,
  auth: FEED_AUTH,
  audit: { kind: 'none' },
  upgrade: 'websocket',
  responses: {
    101: {
      description: 'Switching Protocols: subscribed; the SETs described above follow on the WebSocket. Sec-WebSocket-Protocol is ace-feed when the client offered it.',
      headers: { Upgrade: fixedHeader('websocket'), Connection: fixedHeader('Upgrade'), 'Sec-WebSocket-Accept': { schema: Type.String() } },
    },
    ...refusals({
      unauthorized: 'no feed token, or not a live feed token of this platform (the same answer whether or not the platform exists).',
      validation_error: 'platform_id is not a UUID, or since is not a non-negative integer.',
      // A plain GET never reaches the WebSocket handler: the server's 404 for a path with no plain route.
      not_found: 'a request without a WebSocket upgrade (Upgrade: websocket and Sec-WebSocket-Key): this path serves upgrades only; poll GET .../revocations instead.',
      rate_limited: 'this client address holds REVOCATION_WS_MAX_PER_ADDRESS sockets on this process already (Retry-After; poll meanwhile).',
      service_unavailable: 'the process holds REVOCATION_WS_MAX sockets already, or the store is unavailable (Retry-After).',
    }),
  },
} satisfies RouteDeclaration;

function parseSince(query: string): number {
  const since = new URLSearchParams(query).get('since');
  if (since === null || since === '') return 0;
  if (!SEQ.test(since)) throw new ServiceError('validation_error', 'since must be a non-negative integer (a sequence number of the feed).');
  return Number(since);
}

/** The feed token offered as a subprotocol, and whether ace-feed was offered. */
export function offeredProtocols(header: string): { token: string; feed: boolean } {
  let token = '';
  let feed = false;
  for (const raw of header.split(',')) {
    const protocol = raw.trim();
    if (protocol === FEED_SUBPROTOCOL) feed = true;
    else if (protocol.startsWith(FEED_TOKEN_SUBPROTOCOL_PREFIX)) token = protocol.slice(FEED_TOKEN_SUBPROTOCOL_PREFIX.length);
  }
  return { token, feed };
}

interface SocketData {
  platformId: string;
  since: number;
  closed: boolean;
  credentialId: string;
  address: string;
}

export interface SocketOptions {
  logger: Logger;
  feedCredentials: Pick<FeedCredentialService, 'verify' | 'isLive' | 'onChange'>;
  /** The client address of an upgrade request (HttpServer.clientAddressOf: TRUST_PROXY_* apply). */
  addressOf: (res: uWS.HttpResponse, req: uWS.HttpRequest) => string;
  /** REVOCATION_WS_MAX_PER_ADDRESS and REVOCATION_WS_MAX. */
  maxPerAddress: number;
  maxTotal: number;
}

/**
 * Serves the push side on the public uWS app. Each socket subscribes to its platform's topic; the
 * first messages are the SETs above its `since` and the signed head, then every new SET as published and
 * the re-signed head every heartbeat (RevocationTransmitter). `topics` is the transmitter's transport, made
 * on this app before it. Returns a stop function.
 */
export function attachRevocationSockets(app: uWS.TemplatedApp, topics: SocketTopics, transmitter: RevocationTransmitter, metrics: RevocationMetrics, options: SocketOptions): () => void {
  /** Open sockets per platform, to close those whose credential was deleted. */
  const sockets = new Map<string, Set<uWS.WebSocket<SocketData>>>();
  /** Places taken per client address, and in total: from the cap check (before the upgrade) to the close. */
  const perAddress = new Map<string, number>();
  let total = 0;
  const take = (address: string) => {
    total++;
    perAddress.set(address, (perAddress.get(address) ?? 0) + 1);
  };
  const release = (address: string) => {
    total--;
    const left = (perAddress.get(address) ?? 1) - 1;
    if (left <= 0) perAddress.delete(address);
    else perAddress.set(address, left);
  };
  // A deleted credential: its sockets are closed on every instance (the bus notice reloads the index here).
  options.feedCredentials.onChange((changed) => {
    for (const [platformId, open] of sockets) {
      if (changed !== undefined && changed !== platformId) continue;
      for (const ws of open) {
        const data = ws.getUserData();
        if (!data.closed && !options.feedCredentials.isLive(platformId, data.credentialId)) ws.end(CLOSE_CREDENTIAL_REVOKED, 'feed credential revoked');
      }
    }
  });
  app.ws<SocketData>(revocationSocketRoute.path, {
    // No compression: uWS's default (the repack's typings lack the DISABLED constant).
    maxPayloadLength: 512,
    // uWS pings idle sockets itself; a peer silent for this long is dropped.
    idleTimeout: 60,
    sendPingsAutomatically: true,
    maxBackpressure: 256 * 1024,
    upgrade: (res, req, context) => {
      const key = req.getHeader('sec-websocket-key');
      const protocol = req.getHeader('sec-websocket-protocol');
      const extensions = req.getHeader('sec-websocket-extensions');
      let aborted = false;
      res.onAborted(() => (aborted = true));
      const authorization = req.getHeader('authorization');
      let platformId: string;
      let since: number;
      try {
        platformId = platformParam(decodeURIComponent(req.getParameter(0) ?? ''));
        since = parseSince(req.getQuery() ?? '');
      } catch (error) {
        return refuse(res, error as ServiceError);
      }
      // The caps first (no work, no store read for a refused socket); the place is taken until the close.
      const address = options.addressOf(res, req);
      if (total >= options.maxTotal) {
        metrics.refused('websocket', 'total');
        return refuse(res, unavailable(TOTAL_RETRY_AFTER, 'This process holds as many revocation sockets as it may (REVOCATION_WS_MAX): poll the feed meanwhile.'));
      }
      if ((perAddress.get(address) ?? 0) >= options.maxPerAddress) {
        metrics.refused('websocket', 'per_address');
        return refuse(res, new ServiceError('rate_limited', 'This address holds as many revocation sockets as it may (REVOCATION_WS_MAX_PER_ADDRESS).', PER_ADDRESS_RETRY_AFTER));
      }
      take(address);
      const offered = offeredProtocols(protocol);
      const token = bearerToken(authorization) || offered.token;
      options.feedCredentials.verify(platformId, token).then(
        (credentialId) => {
          if (aborted) return release(address);
          if (credentialId === undefined) {
            release(address);
            metrics.refused('websocket', 'unauthorized');
            return refuse(res, feedUnauthorized());
          }
          // The token never goes back in the answer: only ace-feed, when offered.
          const answer = offered.feed ? FEED_SUBPROTOCOL : '';
          res.cork(() => res.upgrade<SocketData>({ platformId, since, closed: false, credentialId, address }, key, answer, extensions, context));
        },
        (error) => {
          release(address);
          if (!aborted) refuse(res, toServiceError(error));
        },
      );
    },
    open: (ws) => {
      const data = ws.getUserData();
      topics.subscribe(ws, data.platformId);
      let open = sockets.get(data.platformId);
      if (!open) sockets.set(data.platformId, (open = new Set()));
      open.add(ws);
      // Deleted between the check and the open: closed now rather than at the next change.
      if (!options.feedCredentials.isLive(data.platformId, data.credentialId)) ws.end(CLOSE_CREDENTIAL_REVOKED, 'feed credential revoked');
      metrics.subscriberDelta(1);
      // Subscribed first, then the catch-up: an entry appended in between arrives twice, never zero times.
      transmitter.subscribed(data.platformId, data.since).then(
        (sets) => {
          if (data.closed) return;
          ws.cork(() => {
            for (const set of sets) ws.send(set, false);
          });
        },
        (error) => {
          options.logger.warn({ err: { message: (error as Error).message } }, 'revocation catch-up failed; closing the socket');
          if (!data.closed) ws.end(1011, 'catch-up unavailable');
        },
      );
    },
    message: () => {
      // Subscribers have nothing to say; anything sent is ignored.
    },
    close: (ws) => {
      const data = ws.getUserData();
      data.closed = true;
      release(data.address);
      const open = sockets.get(data.platformId);
      open?.delete(ws);
      if (open?.size === 0) sockets.delete(data.platformId);
      topics.unsubscribed(data.platformId);
      metrics.subscriberDelta(-1);
    },
  });

  // The heartbeat is the feed's signed head SET, published per platform by RevocationTransmitter.
  return () => {};
}

function refuse(res: uWS.HttpResponse, error: ServiceError): void {
  const reply = refusalReply(error);
  res.cork(() => {
    res.writeStatus(`${reply.status} ${STATUS_CODES[reply.status] ?? ''}`);
    for (const name in reply.headers) res.writeHeader(name, reply.headers[name]);
    res.end(reply.body, true);
  });
}
