// Runtime-neutral entry point (`@agent-credential-exchange/middleware/edge`): Cloudflare Workers, Vercel
// Edge / Next.js middleware, Deno, Bun, browsers' service workers, and Node too. Nothing here imports a
// `node:` module, `ws`, or evaluates code at run time: the scope file comes as text or parsed object,
// and the revocation feed uses the global `fetch` and `WebSocket` (polling where there is no WebSocket).
export { createVerifier, DEFAULT_VERIFIED_TOKEN_CACHE_SIZE, MAX_TOKEN_LENGTH, ResourceNotRegisteredError } from './verifier.js';
export { agentOf, hasAgent, mcpAuthInfo, MissingAgentError } from './auth-info.js';
export type { McpAuthInfo } from './auth-info.js';
export { normaliseResource } from '@agent-credential-exchange/protocol/resource-identifier';
export type {
  AgentClaims,
  AuthorizeInput,
  AuthorizeResult,
  CoreVerifierOptions,
  RouteTarget,
  Verifier,
  VerifierBaseOptions,
} from './verifier.js';
export type { Refusal, RefusalCode } from './challenge.js';
export { JwksUnavailableError, UnknownKeyError } from './jwks-cache.js';
export { DocumentRejectedError, FeedUnauthorizedError } from './revocation-feed.js';
export type { FeedSocket, FeedSocketConstructor, RevocationFeedOptions, RevocationFeedStats } from './revocation-feed.js';
export { loadScopeFile, RouteTable, ScopeFileError } from './scope-map.js';
export type { RouteMatch, RouteResolution, ScopeTextSource, TemplateSyntax } from './scope-map.js';
export { canonicalizeTarget, DEFAULT_MAX_PATH_LENGTH, DEFAULT_MAX_SEGMENT_LENGTH } from './canonical-path.js';
export type { CanonicalTarget } from './canonical-path.js';
export { fetchAgentAuth, refusalResponse, withAgentAuth } from './adapters/fetch.js';
export type { AgentFetchHandler, FetchAuthorized, FetchVerdict } from './adapters/fetch.js';
export { honoAgentAuth } from './adapters/hono.js';
export type { AgentEnv, HonoLikeContext } from './adapters/hono.js';
export { nextMiddleware, nextRouteHandler } from './adapters/next.js';
export type { NextMiddlewareOptions } from './adapters/next.js';
