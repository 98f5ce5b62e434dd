// Public revocation feed endpoints, as an SSF 1.0 transmitter: the configuration, RFC 8936 poll (POST) and
// the WebSocket push of the same SETs (one uWS topic per platform). Thin: validation, the feed token, the
// per-credential poll budget and framing here; the stream, its signing and the push in
// adapters/revocation-feed (RevocationTransmitter).
import { STATUS_CODES } from 'node:http';
import * as uWS from 'uWebSockets.js';
import { Type } from '@sinclair/typebox';
import { ServiceError, toServiceError, unavailable } from '../../../core/errors.js';
import type { FeedCredentialService } from '../../../core/revocation/feed-credential-service.js';
import { PlatformId, UUID_PATTERN } from '../schemas/public.js';
import { fixedHeader, refusals } from '../responses.js';
import client from 'prom-client';
import { MAX_MAX_EVENTS, type RevocationTransmitter } from '../../../core/revocation/transmitter.js';
import type { RevocationMetrics } from './revocation-metrics.js';
import type { SocketTopics } from './revocation-topics.js';
import type { Logger } from '../../telemetry/index.js';
import { parseJsonBody } from '../json-body.js';
import { PollBudget } from '../poll-budget.js';
import { compileValidator } from '../schemas/validate.js';
import {
  CLOSE_CREDENTIAL_REVOKED,
  DELIVERY_POLL,
  DELIVERY_WEBSOCKET,
  EVENT_PLATFORM_TOKENS_REVOKED,
  EVENT_SESSION_REVOKED,
  EVENT_SIGNING_KEY_RETIRED,
  EVENT_STREAM_HEAD,
  FEED_SUBPROTOCOL,
  FEED_TOKEN_SUBPROTOCOL_PREFIX,
  feedPollPath,
  feedSocketPath,
  type PollRequest,
} from '@agent-credential-exchange/middleware/feed-document';
import { HttpError } from '../errors.js';
import { bindRoutes, refusalReply, type HttpReply, type HttpRequest, type Route, type RouteCredentials, type RouteDeclaration } from '../types.js';

export const FEED_PATH = feedPollPath(':platform_id');
export const FEED_SOCKET_PATH = feedSocketPath(':platform_id');
export const SSF_CONFIGURATION_PATH = '/.well-known/ssf-configuration';
const UUID = new RegExp(UUID_PATTERN);
const SEQ = /^(0|[1-9]\d{0,15})$/;
const BEARER = /^Bearer +(\S+) *$/i;
/** Polls per second each feed credential may send to one process, and the burst above that: a receiver polls
 * about once a second; this leaves room for replicas sharing a credential, and for paging. */
const POLL_BUDGET = { perSecond: 20, burst: 40 };
const POLL_BUDGET_TEXT = `${POLL_BUDGET.perSecond} polls a second (bursts of ${POLL_BUDGET.burst})`;
/** Seconds a receiver refused by a WebSocket cap waits (it polls meanwhile). */
const PER_ADDRESS_RETRY_AFTER = 30;
const TOTAL_RETRY_AFTER = 10;

/** The one refusal of a feed request without a valid token of this platform (no oracle: unknown platforms get it too). */
export function feedUnauthorized(): ServiceError {
  return new HttpError('unauthorized', 'Missing or invalid feed token for this platform.', {
    'WWW-Authenticate': 'Bearer realm="revocations", error="invalid_token"',
  });
}

/** The feed token, checked by the feed's own steps (the poll's onRequest and handler, the upgrade). */
const FEED_AUTH: RouteCredentials = {
  schemes: {
    feedToken: {
      type: 'http',
      scheme: 'bearer',
      description:
        'A feed token of this platform (POST /admin/v1/platforms/{platform_id}/feed-credentials). On the WebSocket it may ' +
        'instead be offered as the subprotocol "ace-feed-token.<token>" beside "ace-feed" (browser WebSocket constructors cannot set headers).',
    },
  },
  optional: false,
};

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
    body: { schema: PollRequestSchema, contentType: 'application/json', required: true, answeredFromMemory: true },
    auth: FEED_AUTH,
    audit: { kind: 'none' },
    responses: {
      200: { description: 'The SETs above the acknowledged ones, and whether more are available.', headers: { 'Cache-Control': fixedHeader('no-store') }, content: { 'application/json': PollResponseSchema } },
      ...refusals({
        unauthorized: 'no feed token, or not a live feed token of this platform (the same answer whether or not the platform exists), with WWW-Authenticate: Bearer realm="revocations", error="invalid_token".',
        validation_error: 'platform_id is not a UUID, or the poll request is malformed.',
        rate_limited: `this feed credential sent more than ${POLL_BUDGET_TEXT} to this instance (Retry-After: 1).`,
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
    // Receivers authenticate with a bearer token (RFC 6750): a feed credential of the platform.
    authorization_schemes: [{ spec_urn: 'urn:ietf:rfc:6750' }],
    poll_endpoint_template: `${publicBaseUrl}${FEED_PATH.replace(':platform_id', '{platform_id}')}`,
    websocket_endpoint_template: `${publicBaseUrl}${FEED_SOCKET_PATH.replace(':platform_id', '{platform_id}')}?since={seq}`,
  };
}

/** The bearer token of an Authorization header ('' when there is none). */
export function bearerToken(header: string): string {
  return BEARER.exec(header)?.[1] ?? '';
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

export interface RevocationRouteDeps {
  transmitter: RevocationTransmitter;
  feedCredentials: Pick<FeedCredentialService, 'verify' | 'verifyNow' | 'generation' | 'isLive' | 'onChange' | 'hasCredentials'>;
  metrics: Pick<RevocationMetrics, 'refused'>;
  /** Where the poll's budgets and answer cache are declared (they read the routes' budget and the transmitter). */
  registry: client.Registry;
}


const EMPTY = Buffer.alloc(0);
const POLL_HEADERS = { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' };
/** The 401 of the poll, built once (a flood of wrong tokens costs no allocation of an error). */
const UNAUTHORIZED_REPLY = refusalReply(feedUnauthorized(), { prebuilt: true });
/** The 429 of a credential past its poll budget, built once. */
const OVER_BUDGET_REPLY = refusalReply(
  new ServiceError('rate_limited', 'This feed credential polls faster than its budget on this instance: poll about once a second.', 1),
  { prebuilt: true },
);

/** Gauges read when scraped: credentials holding a poll budget, and bytes of poll answers kept in memory. */
function declarePollMetrics(registry: client.Registry, budget: PollBudget, transmitter: RevocationTransmitter): void {
  new client.Gauge({
    name: 'ace_revocation_poll_budgets',
    help: 'Feed credentials holding a poll budget on this process (released when the credential is deleted).',
    registers: [registry],
    collect() {
      this.set(budget.size);
    },
  });
  new client.Gauge({
    name: 'ace_revocation_poll_answer_cache_bytes',
    help: 'Bytes of serialised revocation poll answers kept in memory by this process (bounded).',
    registers: [registry],
    collect() {
      this.set(transmitter.answerCacheBytes);
    },
  });
}

export function revocationRoutes(deps: RevocationRouteDeps, ssf: { issuer: string; publicBaseUrl: string }): Route[] {
  const { transmitter, feedCredentials, metrics } = deps;
  const budget = new PollBudget(POLL_BUDGET);
  declarePollMetrics(deps.registry, budget, transmitter);
  // A deleted credential's bucket goes with it; a platform left without credentials drops its cached answers.
  feedCredentials.onChange((platformId) => {
    budget.release(platformId, (platform, id) => feedCredentials.isLive(platform, id));
    if (platformId !== undefined && !feedCredentials.hasCredentials(platformId)) transmitter.release(platformId);
  });
  // Poll bodies already parsed and validated (a receiver sends the same body until a new SET arrives, and a
  // flood repeats one): the last one compared byte for byte first, then a map keyed by the bytes, bounded,
  // emptied when full.
  const parsed = new Map<string, PollRequest>();
  let lastBody: { contentType: string; bytes: Buffer; poll: PollRequest } | undefined;
  const pollRequest = (request: HttpRequest): PollRequest => {
    const bytes = request.body ?? EMPTY;
    const { contentType } = request.headers;
    if (lastBody !== undefined && lastBody.contentType === contentType && lastBody.bytes.equals(bytes)) return lastBody.poll;
    // The media type is part of the key: a body sent with another type still gets its 415.
    const key = `${contentType}\n${bytes.toString('latin1')}`;
    let body = parsed.get(key);
    if (!body) {
      body = validatePoll(parseJsonBody(request)) as PollRequest;
      if (parsed.size >= 256) parsed.clear();
      parsed.set(key, body);
    }
    lastBody = { contentType, bytes, poll: body };
    return body;
  };
  // The bearer token of the last Authorization header seen (a receiver, or a flood, repeats its header).
  let lastAuthorization = '';
  let lastToken = '';
  const tokenOf = (authorization: string): string => {
    if (authorization !== lastAuthorization) {
      lastToken = bearerToken(authorization);
      lastAuthorization = authorization;
    }
    return lastToken;
  };
  // The platform id of the last path seen, checked and lower-cased once.
  let lastPlatformParam = '';
  let lastPlatformId = '';
  const platformOf = (param: string): string | undefined => {
    if (param === lastPlatformParam) return lastPlatformId;
    if (!UUID.test(param)) return undefined;
    lastPlatformId = param.toLowerCase();
    lastPlatformParam = param;
    return lastPlatformId;
  };
  const unauthorized = (): HttpReply => {
    metrics.refused('poll', 'unauthorized');
    return UNAUTHORIZED_REPLY;
  };
  // The headers' verdict on a live token, kept for the same request's handler (uWS calls the two back to back
  // when the body came with the headers): reused only while the credential index has not changed since.
  let accepted: { request: HttpRequest; platformId: string; generation: number } | undefined;
  const acceptedPlatform = (request: HttpRequest): string | undefined => {
    if (accepted === undefined || accepted.request !== request || accepted.generation !== feedCredentials.generation) return undefined;
    const { platformId } = accepted;
    accepted = undefined;
    return platformId;
  };
  // A token known to be wrong, or a credential past its poll budget, is refused on the headers: its body is
  // never read. Checked from memory (FeedCredentialService): a flood of wrong tokens or unknown platforms
  // costs no query. A credential's budget is taken here once per request.
  const refuseOnHeaders = (request: HttpRequest): HttpReply | undefined => {
    const platformId = platformOf(request.params.platform_id);
    if (platformId === undefined) return undefined; // the handler answers 422
    const known = feedCredentials.verifyNow(platformId, tokenOf(request.headers.authorization));
    if (known === null) return unauthorized();
    if (known === undefined) return undefined;
    if (!budget.take(known, platformId)) return overBudget();
    accepted = { request, platformId, generation: feedCredentials.generation };
    return undefined;
  };
  // The hot path answers synchronously (no promise round, like the JWKS): a current token index and a
  // serialised answer in memory. Otherwise the same checks, awaited.
  const poll = (request: HttpRequest): HttpReply | Promise<HttpReply> => {
    let platformId = acceptedPlatform(request);
    if (platformId === undefined) {
      // The headers' verdict is gone (the index changed, or another request's headers came in between): again.
      const refused = refuseOnHeaders(request);
      if (refused) return refused;
      platformId = acceptedPlatform(request);
      // Not a UUID (platformParam answers 422), or not decidable from memory now (a reload in progress): the
      // token first, the body after, as on the hot path.
      if (platformId === undefined) return slowPoll(platformParam(request.params.platform_id), tokenOf(request.headers.authorization), request);
    }
    const body = pollRequest(request);
    const cached = transmitter.pollNow(platformId, body);
    if (cached !== undefined) return { status: 200, headers: POLL_HEADERS, body: cached };
    return answer(platformId, body);
  };
  const slowPoll = async (platformId: string, token: string, request: HttpRequest): Promise<HttpReply> => {
    const credentialId = await feedCredentials.verify(platformId, token);
    if (credentialId === undefined) return unauthorized();
    if (!budget.take(credentialId, platformId)) return overBudget();
    return answer(platformId, pollRequest(request));
  };
  const overBudget = (): HttpReply => {
    metrics.refused('poll', 'budget');
    return OVER_BUDGET_REPLY;
  };
  const answer = async (platformId: string, body: PollRequest): Promise<HttpReply> => {
    const set = await transmitter.poll(platformId, body);
    if (set === undefined) return UNAUTHORIZED_REPLY;
    return { status: 200, headers: POLL_HEADERS, body: set };
  };
  const configuration = Buffer.from(JSON.stringify(ssfConfiguration(ssf.issuer, ssf.publicBaseUrl)));
  return bindRoutes(
    revocationRouteTable,
    {
      poll,
      configuration: () => ({ status: 200, headers: { 'Content-Type': 'application/json', 'Cache-Control': 'public, max-age=3600' }, body: configuration }),
    },
    { poll: { onRequest: refuseOnHeaders } },
  );
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
