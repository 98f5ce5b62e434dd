// The revocation feed's RFC 8936 poll (POST): the SETs above the acknowledged ones, answered from the
// transmitter's streams in memory. Thin: validation, the feed token, the per-credential poll budget here;
// the stream, its signing and the push in src/core/revocation/ (RevocationTransmitter). The feed token's
// pieces (its declared scheme, the one refusal, the bearer, the platform id) serve the WebSocket too
// (revocation-socket.ts); the SSF configuration is ssf.ts.
import { Type } from '@sinclair/typebox';
import { ServiceError } from '../../../core/errors.js';
import type { FeedCredentialService } from '../../../core/revocation/feed-credential-service.js';
import { PlatformId, UUID_PATTERN } from '../schemas/public.js';
import { fixedHeader, refusals } from '../responses.js';
import client from 'prom-client';
import { MAX_MAX_EVENTS, type RevocationTransmitter } from '../../../core/revocation/transmitter.js';
import type { RevocationMetrics } from './revocation-metrics.js';
import { parseJsonBody } from '../json-body.js';
import { PollBudget } from '../poll-budget.js';
import { compileValidator } from '../schemas/validate.js';
import { feedPollPath, type PollRequest } from '@agent-credential-exchange/protocol/feed-document';
import { HttpError } from '../errors.js';
import { bindRoutes, refusalReply, type HttpReply, type HttpRequest, type Route, type RouteCredentials, type RouteDeclaration } from '../types.js';

export const FEED_PATH = feedPollPath(':platform_id');
const UUID = new RegExp(UUID_PATTERN);
const BEARER = /^Bearer +(\S+) *$/i;
/** Polls per second each feed credential may send to one process, and the burst above that: a receiver polls
 * about once a second; this leaves room for replicas sharing a credential, and for paging. */
const POLL_BUDGET = { perSecond: 20, burst: 40 };
const POLL_BUDGET_TEXT = `${POLL_BUDGET.perSecond} polls a second (bursts of ${POLL_BUDGET.burst})`;

/** The one refusal of a feed request without a valid token of this platform (no oracle: unknown platforms get it too). */
export function feedUnauthorized(): ServiceError {
  return new HttpError('unauthorized', 'Missing or invalid feed token for this platform.', {
    'WWW-Authenticate': 'Bearer realm="revocations", error="invalid_token"',
  });
}

/** The feed token, checked by the feed's own steps (the poll's onRequest and handler, the upgrade). */
export const FEED_AUTH: RouteCredentials = {
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
export const FEED_PARAMS = { platform_id: PlatformId };
export const SET_FORMAT =
  'Each revocation is an RFC 8417 Security Event Token (typ secevent+jwt, RS256, kid of a service key in the JWKS; ' +
  'aud the platform id; jti "<platform_id>:<seq>"), with CAEP session-revoked for an agent, and this service\'s ' +
  'platform-tokens-revoked and signing-key-retired events (docs/revocation.md). A signed stream-head SET carries ' +
  'the platform\'s head sequence.';

export const revocationPollRouteTable = {
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
} satisfies Record<string, RouteDeclaration>;

const validatePoll = compileValidator(PollRequestSchema);

export function platformParam(value: string): string {
  if (!UUID.test(value)) throw new ServiceError('validation_error', 'platform_id must be a UUID.');
  return value.toLowerCase();
}

/** The bearer token of an Authorization header ('' when there is none). */
export function bearerToken(header: string): string {
  return BEARER.exec(header)?.[1] ?? '';
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

export function revocationPollRoutes(deps: RevocationRouteDeps): Route[] {
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
  return bindRoutes(revocationPollRouteTable, { poll }, { poll: { onRequest: refuseOnHeaders } });
}
