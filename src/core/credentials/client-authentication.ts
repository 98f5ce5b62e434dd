// How a client proved who it is at the token endpoint: the method (RFC 7591 §2 `token_endpoint_auth_method`
// terms where one exists) and what identified the credential. The authenticators return it with the agent's
// view; the token service puts it in `token.issued`, and a refusal carries what the client claimed
// (unverified, bounded and cleaned by the event builder: src/core/audit/events.ts).
import type { AgentView } from '../model.js';

/**
 * - `client_secret`: the api_key_id and secret (the contract's JSON body, or OAuth client_secret_basic /
 *   client_secret_post);
 * - `private_key_jwt`: a JWT the client signed with one of its registered keys (RFC 7523 §2.2, OpenID
 *   Connect Core §9);
 * - `workload`: a token the workload's platform issued, from a trusted issuer, its subject bound to an agent
 *   (workload identity federation; sent as an RFC 7523 §2.2 client assertion too).
 */
export const CLIENT_AUTH_METHODS = ['client_secret', 'private_key_jwt', 'workload'] as const;
export type ClientAuthMethod = (typeof CLIENT_AUTH_METHODS)[number];

export interface ClientAuthentication {
  method: ClientAuthMethod;
  /** The api_key_id (client_id) presented, or for private_key_jwt its `iss`. */
  apiKeyId?: string;
  /** private_key_jwt: the `kid` of the client key (the assertion's JWS header). */
  clientKid?: string;
  /** A client assertion's `jti`. */
  assertionJti?: string;
  /** workload: the token's `iss`, the trusted issuer's id (when it is trusted), and its `sub`. */
  issuer?: string;
  issuerId?: string;
  subject?: string;
}

/** An authenticated agent, and how it authenticated. */
export interface Authenticated {
  view: AgentView;
  authentication: ClientAuthentication;
}
