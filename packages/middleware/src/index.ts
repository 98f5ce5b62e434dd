// Platform middleware of the Agent Credential Exchange, Node entry point: verifies agents' Bearer tokens
// locally against the service's JWKS and enforces the scope file. Everything of the runtime-neutral entry
// (`./edge`: core, Fetch, Hono, Next.js) plus the Node adapters (node:http, Express, Fastify, Koa) and a
// createVerifier that also reads the scope file from disk.
export * from './edge.js';
export { createVerifier } from './node.js';
export type { VerifierOptions } from './node.js';
export type { ScopeFileSource } from './scope-map.js';
export { protectNodeHandler, writeRefusal } from './adapters/node-http.js';
export type { AgentIncomingMessage, AuthorizedListener } from './adapters/node-http.js';
export { expressAgentAuth, expressRouteGuard } from './adapters/express.js';
export type { ExpressLikeRequest, ExpressLikeResponse, ExpressLikeNext, ExpressRouteGuardOptions } from './adapters/express.js';
export { fastifyAgentAuth, fastifyOnRequest } from './adapters/fastify.js';
export type { FastifyLikeRequest, FastifyLikeReply, FastifyLikeInstance } from './adapters/fastify.js';
export { koaAgentAuth } from './adapters/koa.js';
export type { KoaLikeContext } from './adapters/koa.js';
