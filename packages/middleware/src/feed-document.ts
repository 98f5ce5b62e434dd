// The revocation feed's wire format: RFC 8417 Security Event Tokens (compact JWS, RS256, signed with a key
// of the service's JWKS), one per revocation, as the OpenID Shared Signals Framework 1.0 transmits them.
// Shared by the service (which signs) and the middleware (which checks). `typ` is `secevent+jwt` and a SET
// has no `sub` and no `exp`, so it can never pass as an access token (whose typ is JWT / at+jwt).

export const SET_TYP = 'secevent+jwt';

/** CAEP: every token of the subject (an agent, `iss_sub`) issued until `iat_max` is void. */
export const EVENT_SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
/** Ours (no standard type fits): every token of the platform (`aud`) issued until `iat_max` is void. */
export const EVENT_PLATFORM_TOKENS_REVOKED = 'urn:agent-credential-exchange:secevent:platform-tokens-revoked';
/** Ours: every token signed with the key (`sub_id` `{format:"opaque", id: kid}`) is void. */
export const EVENT_SIGNING_KEY_RETIRED = 'urn:agent-credential-exchange:secevent:signing-key-retired';
/**
 * Ours: the stream's head, re-signed every few seconds. A receiver whose last sequence is below `seq` has
 * missed SETs and must poll at once; the head's `iat` is how fresh the receiver's knowledge is.
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
  events: Record<string, RevocationEventBody | { seq: number }>;
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
