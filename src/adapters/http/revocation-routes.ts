// Public revocation feed endpoints: the signed document (GET, for polling and catch-up) and the WebSocket
// push (one uWS topic per platform). Thin: validation and framing here, everything else in
// domain/revocation.
import { STATUS_CODES } from 'node:http';
import * as uWS from 'uWebSockets.js';
import { Type } from '@sinclair/typebox';
import { ServiceError, toServiceError } from '../../core/errors.js';
import { PlatformId, UUID_PATTERN } from './schemas/public.js';
import { ETAG_HEADER, fixedHeader, NOT_MODIFIED, refusals } from './responses.js';
import type { RevocationFeed, FeedTransport } from './revocation-feed.js';
import type { RevocationMetrics } from '../telemetry/index.js';
import type { Logger } from '../telemetry/index.js';
import { matchesEtag } from './public-routes.js';
import { bindRoutes, type HttpReply, type HttpRequest, type Route, type RouteDeclaration } from './types.js';

export const FEED_PATH = '/api/v1/platforms/:platform_id/revocations';
export const FEED_SOCKET_PATH = '/api/v1/platforms/:platform_id/revocations/ws';
/** Short: a cache or proxy may hold the document only briefly; the signature and sequence do the rest. */
const FEED_MAX_AGE_SECONDS = 2;
const UUID = new RegExp(UUID_PATTERN);
const SEQ = /^(0|[1-9]\d{0,15})$/;
const HEARTBEAT_TOPIC = 'rev:heartbeat';
const topic = (platformId: string) => `rev:${platformId}`;

function parseSince(query: string): number {
  const since = new URLSearchParams(query).get('since');
  if (since === null || since === '') return 0;
  if (!SEQ.test(since)) throw new ServiceError('validation_error', 'since must be a non-negative integer (a sequence number of the feed).');
  return Number(since);
}

function platformParam(value: string): string {
  if (!UUID.test(value)) throw new ServiceError('validation_error', 'platform_id must be a UUID.');
  return value.toLowerCase();
}

const FEED_PARAMS = { platform_id: PlatformId };
const FEED_QUERY = Type.Object({
  since: Type.Optional(Type.Integer({ minimum: 0, default: 0, description: 'Sequence number already applied: entries above it are sent.' })),
});
const FEED_DOCUMENT = 'A compact JWS (RS256, header typ "ace-revocations+jwt", kid of the service key that signed it: verify it with ' +
  'the JWKS). Payload: iss, platform_id, since, seq (the platform\'s head sequence), iat, and entries, each ' +
  '{seq, type, expires_at} plus agent_id and iat_max (type "agent": the agent\'s tokens for this platform with ' +
  'iat <= iat_max are void), iat_max (type "platform": every token for the platform with iat <= iat_max is void) ' +
  'or kid (type "key": every token signed with kid is void). Every live entry with a sequence above since is ' +
  'included; resume with since=seq. A verifier must refuse a document whose seq or iat is lower than one it ' +
  'already applied.';

export const revocationRouteTable = {
  document: {
    method: 'GET', path: FEED_PATH, name: 'revocation_feed', operationId: 'getRevocationFeed',
    summary: 'Signed revocation feed of a platform (for polling and catching up; public like the JWKS)',
    description: `${FEED_DOCUMENT} The same documents are pushed over the WebSocket at ./revocations/ws?since=<seq>.`,
    params: FEED_PARAMS,
    query: FEED_QUERY,
    auth: 'none',
    audit: { kind: 'none' },
    responses: {
      200: {
        description: 'The signed document.',
        headers: { 'Cache-Control': fixedHeader(`public, max-age=${FEED_MAX_AGE_SECONDS}`), ETag: ETAG_HEADER },
        content: { 'application/jwt': Type.String({ description: 'Compact JWS.' }) },
      },
      304: NOT_MODIFIED,
      ...refusals({
        not_found: 'no platform with this id.',
        validation_error: 'platform_id is not a UUID, or since is not a non-negative integer.',
        service_unavailable: '',
      }),
    },
  },
} satisfies Record<string, RouteDeclaration>;

/** The push side, served by attachRevocationSockets (uWS's WebSocket handler), declared for the document. */
export const revocationSocketRoute = {
  method: 'GET', path: FEED_SOCKET_PATH, name: 'revocation_socket', operationId: 'subscribeRevocationFeed',
  summary: 'WebSocket push of the revocation feed',
  description:
    'A WebSocket upgrade (RFC 6455: send Connection: Upgrade, Upgrade: websocket, Sec-WebSocket-Key and ' +
    'Sec-WebSocket-Version: 13). Once open, the server sends text messages only: the first is the signed document ' +
    'from since (the catch-up), every later change of the platform\'s feed arrives as a further signed document, ' +
    'and {"type":"heartbeat"} every REVOCATION_HEARTBEAT_SECONDS. The subscriber sends nothing (messages are ' +
    `ignored). The server closes with 1011 when the catch-up cannot be read. ${FEED_DOCUMENT}`,
  params: FEED_PARAMS,
  query: FEED_QUERY,
  auth: 'none',
  audit: { kind: 'none' },
  upgrade: 'websocket',
  responses: {
    101: {
      description: 'Switching Protocols: subscribed; the messages described above follow on the WebSocket.',
      headers: { Upgrade: fixedHeader('websocket'), Connection: fixedHeader('Upgrade'), 'Sec-WebSocket-Accept': { schema: Type.String() } },
    },
    ...refusals({
      not_found: 'no platform with this id.',
      validation_error: 'platform_id is not a UUID, or since is not a non-negative integer.',
      service_unavailable: '',
    }),
  },
} satisfies RouteDeclaration;

export function revocationRoutes(feed: RevocationFeed): Route[] {
  const document = async (request: HttpRequest): Promise<HttpReply> => {
    const platformId = platformParam(request.params.platform_id);
    const since = parseSince(request.query ?? '');
    if (!(await feed.platformExists(platformId))) throw new ServiceError('not_found', 'No platform with this id.');
    const doc = await feed.document(platformId, since);
    const headers = {
      'Content-Type': 'application/jwt',
      'Cache-Control': `public, max-age=${FEED_MAX_AGE_SECONDS}`,
      ETag: doc.etag,
    };
    if (matchesEtag(request.headers.ifNoneMatch, doc.etag)) return { status: 304, headers, representationLength: Buffer.byteLength(doc.body) };
    return { status: 200, headers, body: doc.body };
  };
  return bindRoutes(revocationRouteTable, { document });
}

interface SocketData {
  platformId: string;
  since: number;
  closed: boolean;
}

export interface SocketOptions {
  heartbeatMs: number;
  logger: Logger;
}

/**
 * Serves the push side on the public uWS app. Each socket subscribes to its platform's topic; the
 * first message is the signed catch-up document from its `since`, then every new document as published.
 * Returns a stop function (clears the heartbeat).
 */
export function attachRevocationSockets(app: uWS.TemplatedApp, feed: RevocationFeed, metrics: RevocationMetrics, options: SocketOptions): () => void {
  const perPlatform = new Map<string, number>();
  const transport: FeedTransport = {
    publish: (platformId, message) => void app.publish(topic(platformId), message, false),
    subscribedPlatforms: () => [...perPlatform.keys()],
  };
  feed.attach(transport);

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
      let platformId: string;
      let since: number;
      try {
        platformId = platformParam(decodeURIComponent(req.getParameter(0) ?? ''));
        since = parseSince(req.getQuery() ?? '');
      } catch (error) {
        return refuse(res, error as ServiceError);
      }
      feed.platformExists(platformId).then(
        (exists) => {
          if (aborted) return;
          if (!exists) return refuse(res, new ServiceError('not_found', 'No platform with this id.'));
          res.cork(() => res.upgrade<SocketData>({ platformId, since, closed: false }, key, protocol, extensions, context));
        },
        (error) => !aborted && refuse(res, toServiceError(error)),
      );
    },
    open: (ws) => {
      const data = ws.getUserData();
      ws.subscribe(topic(data.platformId));
      ws.subscribe(HEARTBEAT_TOPIC);
      perPlatform.set(data.platformId, (perPlatform.get(data.platformId) ?? 0) + 1);
      metrics.subscriberDelta(1);
      // Subscribed first, then the catch-up: an entry appended in between arrives twice, never zero times.
      feed.subscribed(data.platformId, data.since).then(
        (doc) => {
          if (!data.closed) ws.send(doc.body, false);
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
      const left = (perPlatform.get(data.platformId) ?? 1) - 1;
      if (left <= 0) perPlatform.delete(data.platformId);
      else perPlatform.set(data.platformId, left);
      metrics.subscriberDelta(-1);
    },
  });

  // A heartbeat lets a subscriber tell a quiet feed from a dead connection.
  const heartbeat = setInterval(() => app.publish(HEARTBEAT_TOPIC, '{"type":"heartbeat"}', false), options.heartbeatMs);
  heartbeat.unref();
  return () => clearInterval(heartbeat);
}

function refuse(res: uWS.HttpResponse, error: ServiceError): void {
  res.cork(() => {
    res.writeStatus(`${error.status} ${STATUS_CODES[error.status] ?? ''}`);
    res.writeHeader('Content-Type', 'application/json');
    res.writeHeader('Cache-Control', 'no-store');
    for (const [name, value] of Object.entries(error.headers ?? {})) res.writeHeader(name, value);
    res.end(error.body(), true);
  });
}
