// Fetch adapter: for every runtime that speaks `Request -> Response` (Hono, Next.js, Bun, Deno, Cloudflare
// Workers, Node's own Request). Runtime-neutral: only the Request, Response and URL globals.
//
// The scope rule is found by the canonical path (canonical-path.ts), as for node:http: a Fetch handler
// routes however it likes. The WHATWG URL parser has already resolved dot-segments and normalised the
// request's URL; what has no single reading beyond that is refused (400), and `withAgentAuth` hands the
// handler a Request whose URL is the canonical one, so it routes on exactly what was checked.
import type { AgentClaims, Verifier } from '../verifier.js';
import type { Refusal } from '../challenge.js';
import { mcpAuthInfo, type McpAuthInfo } from '../auth-info.js';

/** Passed: the agent's claims and the canonical URL (equal to request.url unless the path was rewritten). */
export interface FetchAuthorized {
  ok: true;
  agent: AgentClaims;
  /** The caller as the MCP SDK's AuthInfo: `transport.handleRequest(request, { authInfo: verdict.auth })`. */
  auth: McpAuthInfo;
  /** Absolute URL with the canonical path, to route on. */
  url: string;
}

/** `(Request) -> verdict | Response`: a Response is the refusal, to be returned as it is. */
export type FetchVerdict = FetchAuthorized | Response;

/** A refusal as a Response: status, WWW-Authenticate, Retry-After, JSON body in the contract's shape. */
export function refusalResponse(refusal: Refusal): Response {
  return new Response(refusal.body, {
    status: refusal.status,
    headers: { ...refusal.headers, 'content-type': 'application/json', 'cache-control': 'no-store' },
  });
}

/**
 * The check alone, for code that decides what to do next.
 *
 * @example
 * const auth = fetchAgentAuth(verifier);
 * const verdict = await auth(request);
 * if (verdict instanceof Response) return verdict;
 * return Response.json({ agent: verdict.agent.agentId });
 */
export function fetchAgentAuth(verifier: Verifier): (request: Request) => Promise<FetchVerdict> {
  return async (request) => {
    const url = new URL(request.url);
    const received = `${url.pathname}${url.search}`;
    const result = await verifier.authorize({
      method: request.method,
      target: { kind: 'path', path: received },
      authorization: request.headers.get('authorization') ?? undefined,
    });
    if (!result.ok) return refusalResponse(result);
    const canonical = result.canonicalTarget ?? received;
    const target = canonical === received ? request.url : new URL(canonical, url).href;
    return { ok: true, agent: result.claims, auth: mcpAuthInfo(result.claims), url: target };
  };
}

/** A Fetch handler that also receives the agent; extra arguments (Next.js context, Workers env) pass through. */
export type AgentFetchHandler<Rest extends unknown[]> = (request: Request, agent: AgentClaims, ...rest: Rest) => Response | Promise<Response>;

/**
 * Wraps a `Request -> Response` handler: it runs only for authorized requests, with their claims.
 *
 * @example
 * export default { fetch: withAgentAuth(verifier, (request, agent) => Response.json({ hello: agent.agentId })) };
 */
export function withAgentAuth<Rest extends unknown[]>(verifier: Verifier, handler: AgentFetchHandler<Rest>) {
  const auth = fetchAgentAuth(verifier);
  return async (request: Request, ...rest: Rest): Promise<Response> => {
    const verdict = await auth(request);
    if (verdict instanceof Response) return verdict;
    return handler(verdict.url === request.url ? request : new Request(verdict.url, request), verdict.agent, ...rest);
  };
}
