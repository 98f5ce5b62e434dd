// `@agent-credential-exchange/middleware/fastify`: the Fastify adapters with `request.agent` typed by
// declaration merging into Fastify's own FastifyRequest. Kept off the main entry: augmenting the module
// 'fastify' needs fastify's types installed, which a node:http or Express platform does not have.
import type { AgentClaims } from './verifier.js';
// Makes the augmentation below one of the module 'fastify' (which users of this entry have installed).
import type {} from 'fastify';

export { fastifyAgentAuth, fastifyOnRequest } from './adapters/fastify.js';
export type { FastifyLikeRequest, FastifyLikeReply, FastifyLikeInstance } from './adapters/fastify.js';

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The verified agent (set by fastifyAgentAuth / fastifyOnRequest; null or absent on routes they do not
     * cover). `agentOf(request)` (or the `hasAgent(request)` guard) narrows it.
     */
    agent?: AgentClaims | null;
  }
}
