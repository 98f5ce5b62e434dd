// Public revocation feed endpoints, as an SSF 1.0 transmitter: the configuration, RFC 8936 poll (POST) and
// the WebSocket push of the same SETs (one uWS topic per platform). Thin: validation and framing here, the
// stream in revocation-feed.ts. The old `ace-revocations+jwt` document (GET) is gone: one format.
import { STATUS_CODES } from 'node:http';
import * as uWS from 'uWebSockets.js';
import { Type } from '@sinclair/typebox';
import { ServiceError, toServiceError } from '../../core/errors.js';
import { PlatformId, UUID_PATTERN } from './schemas/public.js';
import { fixedHeader, refusals } from './responses.js';
import { MAX_MAX_EVENTS, type RevocationFeed, type FeedTransport } from './revocation-feed.js';
import type { RevocationMetrics } from '../telemetry/index.js';
import type { Logger } from '../telemetry/index.js';
import { parseJsonBody } from './json-body.js';
import { compileValidator } from './schemas/validate.js';
import {
  DELIVERY_POLL,
  DELIVERY_WEBSOCKET,
  EVENT_PLATFORM_TOKENS_REVOKED,
  EVENT_SESSION_REVOKED,
  EVENT_SIGNING_KEY_RETIRED,
  EVENT_STREAM_HEAD,
} from '@agent-credential-exchange/middleware/feed-document';
import { bindRoutes, type HttpReply, type HttpRequest, type Route, type RouteDeclaration } from './types.js';

export const FEED_PATH = '/api/v1/platforms/:platform_id/revocations';
export const FEED_SOCKET_PATH = '/api/v1/platforms/:platform_id/revocations/ws';
export const SSF_CONFIGURATION_PATH = '/.well-known/ssf-configuration';
const UUID = new RegExp(UUID_PATTERN);
const SEQ = /^(0|[1-9]\d{0,15})$/;
const topic = (platformId: string) => `rev:${platformId}`;

/** RFC 8936 §2.4 poll request (unknown members are ignored, as the RFC asks). */
const PollRequestSchema = Type.Object(
  {
    ack: Type.Optional(Type.Array(Type.String({ maxLength: 128 }), { maxItems: 1000, description: 'jti values of SETs already applied: every SET up to the highest acknowledged is acknowledged.' })),
    maxEvents: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_MAX_EVENTS })),
    returnImmediately: Type.Optional(Type.Boolean()),
    setErrs: Type.Optional(Type.Record(Type.String({ maxLength: 128 }), Type.Unknown(), { maxProperties: 1000 })),
  },
  { $id: 'PollRequest', additionalProperties: true },
);
const PollResponseSchema = Type.Object(
  {
    sets: Type.Record(Type.String(), Type.String({ description: 'A compact SET (RFC 8417, typ secevent+jwt), keyed by its jti.' })),
    moreAvailable: Type.Boolean(),
  },
  { $id: 'PollResponse' },
);
const FEED_PARAMS = { platform_id: PlatformId };
const FEED_QUERY = Type.Object({
  since: Type.Optional(Type.Integer({ minimum: 0, default: 0, description: 'Sequence number already applied: SETs above it are sent.' })),
});
const SET_FORMAT =
  'Each revocation is an RFC 8417 Security Event Token (typ secevent+jwt, RS256, kid of a service key in the JWKS; ' +
  'aud the platform id; jti "<platform_id>:<seq>"), with CAEP session-revoked for an agent, and this service\'s ' +
  'platform-tokens-revoked and signing-key-retired events (docs/revocation.md). A signed stream-head SET carries ' +
  'the platform\'s head sequence.';

export const revocationRouteTable = {
  poll: {
    method: 'POST', path: FEED_PATH, name: 'revocation_poll', operationId: 'pollRevocations',
    summary: 'RFC 8936 poll delivery of the platform\'s revocation SETs',
    description: SET_FORMAT,
    params: FEED_PARAMS,
    body: { schema: PollRequestSchema, contentType: 'application/json', required: true },
    auth: 'none',
    audit: { kind: 'none' },
    responses: {
      200: { description: 'The SETs above the acknowledged ones, and whether more are available.', headers: { 'Cache-Control': fixedHeader('no-store') }, content: { 'application/json': PollResponseSchema } },
      ...refusals({
        not_found: 'no platform with this id.',
        validation_error: 'platform_id is not a UUID, or the poll request is malformed.',
        invalid_json: '',
        unsupported_media_type: '',
        payload_too_large: '',
        service_unavailable: '',
      }),
    },
  },
  configuration: {
    method: 'GET', path: SSF_CONFIGURATION_PATH, name: 'ssf_configuration', operationId: 'getSsfConfiguration',
    summary: 'OpenID Shared Signals Framework 1.0 transmitter configuration',
    auth: 'none',
    audit: { kind: 'none' },
    responses: {
      200: {
        description: 'issuer, jwks_uri, delivery methods (poll, WebSocket push), supported events and the endpoint templates.',
        headers: { 'Cache-Control': fixedHeader('public, max-age=3600') },
        content: { 'application/json': Type.Object({}, { additionalProperties: true }) },
      },
      ...refusals({ method_not_allowed: 'a method other than GET or HEAD.' }),
    },
  },
} satisfies Record<string, RouteDeclaration>;

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
  auth: 'none',
  audit: { kind: 'none' },
  upgrade: 'websocket',
  responses: {
    101: {
      description: 'Switching Protocols: subscribed; the SETs described above follow on the WebSocket.',
      headers: { Upgrade: fixedHeader('websocket'), Connection: fixedHeader('Upgrade'), 'Sec-WebSocket-Accept': { schema: Type.String() } },
    },
    ...refusals({
      not_found: 'no platform with this id.',
      validation_error: 'platform_id is not a UUID, or since is not a non-negative integer.',
      service_unavailable: '',
    }),
  },
} satisfies RouteDeclaration;

const validatePoll = compileValidator(PollRequestSchema);

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

/** The SSF 1.0 transmitter configuration (one implicit stream per platform, its `aud`). */
export function ssfConfiguration(issuer: string, publicBaseUrl: string): Record<string, unknown> {
  return {
    spec_version: '1_0',
    issuer,
    jwks_uri: `${publicBaseUrl}/.well-known/jwks.json`,
    delivery_methods_supported: [DELIVERY_POLL, DELIVERY_WEBSOCKET],
    // Streams are implicit: one per platform, the platform id as `aud`, every revocation event of that platform.
    default_subjects: 'ALL',
    events_supported: [EVENT_SESSION_REVOKED, EVENT_PLATFORM_TOKENS_REVOKED, EVENT_SIGNING_KEY_RETIRED, EVENT_STREAM_HEAD],
    poll_endpoint_template: `${publicBaseUrl}${FEED_PATH.replace(':platform_id', '{platform_id}')}`,
    websocket_endpoint_template: `${publicBaseUrl}${FEED_SOCKET_PATH.replace(':platform_id', '{platform_id}')}?since={seq}`,
  };
}

export function revocationRoutes(feed: RevocationFeed, ssf: { issuer: string; publicBaseUrl: string }): Route[] {
  const poll = async (request: HttpRequest): Promise<HttpReply> => {
    const platformId = platformParam(request.params.platform_id);
    const body = validatePoll(parseJsonBody(request));
    const answer = await feed.poll(platformId, body);
    if (answer === undefined) throw new ServiceError('not_found', 'No platform with this id.');
    return { status: 200, headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' }, body: answer };
  };
  const configuration = Buffer.from(JSON.stringify(ssfConfiguration(ssf.issuer, ssf.publicBaseUrl)));
  return bindRoutes(revocationRouteTable, {
    poll,
    configuration: () => ({ status: 200, headers: { 'Content-Type': 'application/json', 'Cache-Control': 'public, max-age=3600' }, body: configuration }),
  });
}

interface SocketData {
  platformId: string;
  since: number;
  closed: boolean;
}

export interface SocketOptions {
  logger: Logger;
}

/**
 * Serves the push side on the public uWS app. Each socket subscribes to its platform's topic; the
 * first messages are the SETs above its `since` and the signed head, then every new SET as published and
 * the re-signed head every heartbeat (RevocationFeed). Returns a stop function.
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
      perPlatform.set(data.platformId, (perPlatform.get(data.platformId) ?? 0) + 1);
      metrics.subscriberDelta(1);
      // Subscribed first, then the catch-up: an entry appended in between arrives twice, never zero times.
      feed.subscribed(data.platformId, data.since).then(
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
      const left = (perPlatform.get(data.platformId) ?? 1) - 1;
      if (left <= 0) perPlatform.delete(data.platformId);
      else perPlatform.set(data.platformId, left);
      metrics.subscriberDelta(-1);
    },
  });

  // The heartbeat is the feed's signed head SET, published per platform by RevocationFeed.
  return () => {};
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
