// The signed revocation feed document: one JWS (compact, RS256, signed with the service's active key so
// that it verifies with the JWKS). Shared by the service (which signs) and the middleware (which checks).
// Its `typ` differs from an access token's and it has no `sub`, so it can never pass as a token.

export const FEED_TYP = 'ace-revocations+jwt';

/** One entry as it travels: only what a verifier needs. */
export type FeedEntry =
  | { seq: number; type: 'agent'; agent_id: string; iat_max: number; expires_at: number }
  | { seq: number; type: 'platform'; iat_max: number; expires_at: number }
  | { seq: number; type: 'key'; kid: string; expires_at: number };

export interface FeedPayload {
  iss: string;
  platform_id: string;
  /** Every live entry with a sequence above `since` is in `entries`. */
  since: number;
  /** The platform's head sequence when signed: resume from here. */
  seq: number;
  /** Seconds since the epoch; never goes backwards for a given platform's reader. */
  iat: number;
  entries: FeedEntry[];
}
