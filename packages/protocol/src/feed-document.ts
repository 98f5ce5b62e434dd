// The revocation feed's wire format: RFC 8417 Security Event Tokens (compact JWS, RS256, signed with a key
// of the service's JWKS), one per revocation, as the OpenID Shared Signals Framework 1.0 transmits them.
// Shared by the service (which signs), the middleware (which checks) and the conformance generator. `typ` is `secevent+jwt` and a SET
// has no `sub` and no `exp`, so it can never pass as an access token (whose typ is JWT / at+jwt).

export const SET_TYP = 'secevent+jwt';

/** CAEP: every token of the subject (an agent, `iss_sub`) issued until `iat_max` is void. */
export const EVENT_SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
/** Ours (no standard type fits): every token of the platform (`aud`) issued until `iat_max` is void. */
export const EVENT_PLATFORM_TOKENS_REVOKED = 'urn:agent-credential-exchange:secevent:platform-tokens-revoked';
/** Ours: every token signed with the key (`sub_id` `{format:"opaque", id: kid}`) is void. */
export const EVENT_SIGNING_KEY_RETIRED = 'urn:agent-credential-exchange:secevent:signing-key-retired';
/**
 * Ours: the stream's head, re-signed every few seconds: `seq` the last sequence, `live` the sequences the
 * transmitter still serves (StreamHeadBody). A receiver that does not hold every live sequence up to `seq`
 * has missed SETs and must poll at once; otherwise the head's `iat` is how fresh its copy is.
 */
export const EVENT_STREAM_HEAD = 'urn:agent-credential-exchange:secevent:stream-head';

/** RFC 8936 poll delivery, and our WebSocket push of the same SETs. */
export const DELIVERY_POLL = 'urn:ietf:rfc:8936';
export const DELIVERY_WEBSOCKET = 'urn:agent-credential-exchange:ssf:delivery:websocket';

export type SubjectId =
  | { format: 'iss_sub'; iss: string; sub: string }
  | { format: 'opaque'; id: string };

export interface RevocationEventBody {
  /** When the change was made (seconds since the epoch). */
  event_timestamp: number;
  /** Tokens with iat <= iat_max are void (agent and platform events). */
  iat_max?: number;
  /** After this (seconds since the epoch) no token the event can hit is still valid: forget it. */
  expires_at: number;
}

export interface SetPayload {
  iss: string;
  /** The platform id: a stream per platform. */
  aud: string;
  iat: number;
  /** `<platform_id>:<seq>` for revocations (seq: the platform's sequence number), `<platform_id>:head` for the head. */
  jti: string;
  sub_id: SubjectId;
  events: Record<string, RevocationEventBody | StreamHeadBody>;
}

/** RFC 8936 poll request and answer. */
export interface PollRequest {
  ack?: string[];
  maxEvents?: number;
  returnImmediately?: boolean;
  setErrs?: Record<string, unknown>;
}
export interface PollAnswer {
  sets: Record<string, string>;
  moreAvailable?: boolean;
}

export const headJti = (platformId: string) => `${platformId}:head`;
export const revocationJti = (platformId: string, seq: number) => `${platformId}:${seq}`;

/** The sequence number in a revocation SET's jti, or undefined (another stream's jti, the head, garbage). */
export function seqOfJti(jti: unknown, platformId: string): number | undefined {
  if (typeof jti !== 'string' || !jti.startsWith(`${platformId}:`)) return undefined;
  const tail = jti.slice(platformId.length + 1);
  if (!/^(0|[1-9]\d{0,15})$/.test(tail)) return undefined;
  return Number(tail);
}

// --- the stream head's body, and the transport's names ---

/** Inclusive range of sequence numbers, `[from, to]`. */
export type LiveRange = [from: number, to: number];

/**
 * EVENT_STREAM_HEAD's body. `live`: the sequences whose SETs the transmitter still serves, as ascending,
 * disjoint, non-adjacent ranges within 1..seq; a sequence <= seq outside them was purged (expired). Absent
 * from a transmitter of an earlier release: such a head proves no purge.
 */
export interface StreamHeadBody {
  seq: number;
  live?: LiveRange[];
}

/** Ascending distinct sequence numbers as live ranges: [1, 2, 3, 7] -> [[1, 3], [7, 7]]. */
export function liveRangesOf(ascending: readonly number[]): LiveRange[] {
  const ranges: LiveRange[] = [];
  for (const seq of ascending) {
    const last = ranges[ranges.length - 1];
    if (last !== undefined && seq === last[1] + 1) last[1] = seq;
    else ranges.push([seq, seq]);
  }
  return ranges;
}

/** A head's `live` when well-formed for head `seq` (safe-integer pairs, ascending, disjoint, non-adjacent, within 1..seq), else undefined. */
export function parseLiveRanges(value: unknown, seq: number): LiveRange[] | undefined {
  if (!Array.isArray(value)) return undefined;
  let previous = 0;
  for (const range of value) {
    if (!Array.isArray(range) || range.length !== 2) return undefined;
    const [from, to] = range as unknown[];
    if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to)) return undefined;
    // from > previous + 1: after the previous range with a gap (adjacent ranges would be one range).
    if ((from as number) <= previous + (previous === 0 ? 0 : 1) || (to as number) < (from as number) || (to as number) > seq) return undefined;
    previous = to as number;
  }
  return value as LiveRange[];
}

/** HTTP paths of a platform's feed (`:platform_id` gives the route pattern). */
export const feedPollPath = (platformId: string) => `/api/v1/platforms/${platformId}/revocations`;
export const feedSocketPath = (platformId: string) => `/api/v1/platforms/${platformId}/revocations/ws`;
/** The WebSocket subprotocol a receiver offers (with FEED_TOKEN_SUBPROTOCOL_PREFIX + its token beside it). */
export const FEED_SUBPROTOCOL = 'ace-feed';
export const FEED_TOKEN_SUBPROTOCOL_PREFIX = 'ace-feed-token.';
/** Close code of a socket whose feed credential was deleted (4000-4999: for applications, RFC 6455 section 7.4.2). */
export const CLOSE_CREDENTIAL_REVOKED = 4401;
