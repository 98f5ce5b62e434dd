// Platform middleware of the Agent Credential Exchange: verifies agents' Bearer tokens locally against the
// service's JWKS and enforces the scope file. Import as `agent-credential-exchange/middleware`.
export { createVerifier } from './verifier.js';
export type { AgentClaims, AuthorizeInput, AuthorizeResult, RouteTarget, Verifier, VerifierOptions, VerifierBaseOptions } from './verifier.js';
export type { Refusal, RefusalCode } from './challenge.js';
export { DocumentRejectedError } from './revocation-feed.js';
export type { FeedSocket, FeedSocketConstructor, RevocationFeedOptions, RevocationFeedStats } from './revocation-feed.js';
export { loadScopeFile, RouteTable, ScopeFileError } from './scope-map.js';
export type { RouteMatch, RouteResolution, ScopeFileSource, TemplateSyntax } from './scope-map.js';
export { canonicalizeTarget } from './canonical-path.js';
export type { CanonicalTarget } from './canonical-path.js';
export { protectNodeHandler, writeRefusal } from './adapters/node-http.js';
export type { AgentIncomingMessage, AuthorizedListener } from './adapters/node-http.js';
export { expressAgentAuth, expressRouteGuard } from './adapters/express.js';
export type { ExpressLikeRequest, ExpressLikeResponse, ExpressLikeNext, ExpressRouteGuardOptions } from './adapters/express.js';
export { fastifyAgentAuth, fastifyOnRequest } from './adapters/fastify.js';
export type { FastifyLikeRequest, FastifyLikeReply, FastifyLikeInstance } from './adapters/fastify.js';
