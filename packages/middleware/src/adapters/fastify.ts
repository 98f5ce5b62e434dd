// Fastify adapter: `await app.register(fastifyAgentAuth(verifier))` protects every route of the instance
// (the plugin is not encapsulated, as fastify-plugin would arrange); or use `fastifyOnRequest(verifier)`
// as an onRequest hook on chosen routes. Sets `request.agent`. Structural types: no fastify import.
//
// Fastify has already routed when onRequest runs, so the rule is looked up by the template of the route
// it chose (`request.routeOptions.url`, e.g. /orders/:id) and the method: Fastify's own decoding,
// case and slash handling decide, never a second reading of the URL. No route (404) or a template the
// scope file lacks: refused like any unlisted route. HEAD (Fastify adds one per GET route) needs the
// scopes of the GET rule too.
import type { AgentClaims, Verifier } from '../verifier.js';

export interface FastifyLikeRequest {
  method: string;
  url: string;
  headers: { authorization?: string | string[] | undefined };
  /** Fastify 4.10+ / 5: the matched route's options; `url` is its template, undefined for a 404. */
  routeOptions?: { url?: string };
  agent?: AgentClaims | null;
}

export interface FastifyLikeReply {
  code(status: number): FastifyLikeReply;
  headers(values: Record<string, string>): FastifyLikeReply;
  send(body: string): unknown;
}

export interface FastifyLikeInstance {
  decorateRequest(name: string, value: null): unknown;
  addHook(name: 'onRequest', hook: (request: any, reply: any) => Promise<unknown>): unknown;
}

export function fastifyOnRequest(verifier: Verifier) {
  return async (request: FastifyLikeRequest, reply: FastifyLikeReply): Promise<unknown> => {
    const result = await verifier.authorize({
      method: request.method,
      // The path too: the RFC 9728 metadata is answered by path, whichever route (if any) Fastify matched.
      path: request.url,
      target: { kind: 'template', template: request.routeOptions?.url, syntax: 'fastify' },
      authorization: request.headers.authorization,
    });
    if (!result.ok) {
      // Returning the reply after send() ends the request in an async hook.
      return reply
        .code(result.status)
        .headers({ ...result.headers, 'content-type': 'application/json', 'cache-control': 'no-store' })
        .send(result.body);
    }
    request.agent = result.claims;
    return undefined;
  };
}

export function fastifyAgentAuth(verifier: Verifier) {
  const hook = fastifyOnRequest(verifier);
  const plugin = async (app: FastifyLikeInstance): Promise<void> => {
    app.decorateRequest('agent', null);
    app.addHook('onRequest', hook);
  };
  // What fastify-plugin sets: skip encapsulation so the hook covers the parent's routes too.
  Object.assign(plugin, { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'agent-credential-exchange' });
  return plugin;
}
