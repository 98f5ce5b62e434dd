// The caller as the MCP TypeScript SDK reads it (its `AuthInfo`: `req.auth` behind Express, the
// `authInfo` option of a Fetch transport, `extra.authInfo` in tool handlers), so an MCP server behind the
// middleware needs no glue. Structural: the SDK is not a dependency.
import type { AgentClaims } from './verifier.js';

/** The MCP SDK's `AuthInfo` (`@modelcontextprotocol/sdk/server/auth/types.js`), field for field. */
export interface McpAuthInfo {
  /** The access token as presented. */
  token: string;
  /** `client_id`: the agent's api_key_id (its `sub` when a token has none). */
  clientId: string;
  scopes: string[];
  /** `exp`, seconds since the epoch. */
  expiresAt?: number;
  /** The resource identifier (RFC 8707) the token was issued for, when it names one in `aud`. */
  resource?: URL;
  /** `agentId` (`sub`), `platformId`, `tokenId` (`jti`). */
  extra?: Record<string, unknown>;
}

export function mcpAuthInfo(claims: AgentClaims): McpAuthInfo {
  return {
    token: claims.token,
    clientId: claims.clientId ?? claims.agentId,
    scopes: [...claims.scopes],
    expiresAt: claims.expiresAt,
    ...(claims.resource !== undefined && URL.canParse(claims.resource) ? { resource: new URL(claims.resource) } : {}),
    extra: { agentId: claims.agentId, platformId: claims.platformId, tokenId: claims.tokenId },
  };
}

/**
 * The verified agent of a request the middleware let through (Express `req`, Fastify `request`), or an
 * Error when there is none: a route the middleware does not cover. Narrows the optional `agent` field.
 *
 * @example
 * app.get('/orders/:id', guard, (req, res) => res.json({ agent: agentOf(req).agentId }));
 */
export function agentOf(request: { agent?: AgentClaims | null | undefined }): AgentClaims {
  if (!request.agent) throw new MissingAgentError();
  return request.agent;
}

/** Type guard: the request carries a verified agent. */
export function hasAgent<R extends { agent?: AgentClaims | null | undefined }>(request: R): request is R & { agent: AgentClaims } {
  return request.agent !== undefined && request.agent !== null;
}

/** `agentOf` on a request no middleware of this package authorized (the route is not covered). */
export class MissingAgentError extends Error {
  readonly code = 'ERR_ACE_NO_AGENT';
  override name = 'MissingAgentError';
  constructor() {
    super('No verified agent on this request: the route is not behind expressAgentAuth / expressRouteGuard / fastifyAgentAuth');
  }
}
