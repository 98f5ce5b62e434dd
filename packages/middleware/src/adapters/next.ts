// Next.js helpers. No next import: NextRequest is a Request, and Next.js accepts a plain Response.
// - Route handlers (app/.../route.ts): `export const GET = nextRouteHandler(verifier, (req, agent, ctx) => ...)`.
// - middleware.ts: `export const middleware = nextMiddleware(verifier)`; returning undefined lets the
//   request go on, a Response ends it. Pass claims on with `onAuthorized` (e.g. as request headers).
import type { AgentClaims, Verifier } from '../verifier.js';
import { fetchAgentAuth } from './fetch.js';

/**
 * A route handler with the agent: Next.js calls it with (request, context). Next.js has routed already
 * (the file is the route), so the handler gets its own NextRequest back, not a rewritten copy.
 */
export function nextRouteHandler<Req extends Request, Context = unknown>(
  verifier: Verifier,
  handler: (request: Req, agent: AgentClaims, context: Context) => Response | Promise<Response>,
): (request: Req, context: Context) => Promise<Response> {
  const auth = fetchAgentAuth(verifier);
  return async (request, context) => {
    const verdict = await auth(request);
    if (verdict instanceof Response) return verdict;
    return handler(request, verdict.agent, context);
  };
}

export interface NextMiddlewareOptions<Req extends Request> {
  /** Called for authorized requests; its Response (e.g. NextResponse.next({ request: { headers } })) is returned. */
  onAuthorized?: (request: Req, agent: AgentClaims) => Response | undefined | Promise<Response | undefined>;
}

/** middleware.ts: refuses with the verifier's Response, else goes on (or returns onAuthorized's Response). */
export function nextMiddleware<Req extends Request = Request>(verifier: Verifier, options: NextMiddlewareOptions<Req> = {}) {
  const auth = fetchAgentAuth(verifier);
  return async (request: Req): Promise<Response | undefined> => {
    const verdict = await auth(request);
    if (verdict instanceof Response) return verdict;
    return options.onAuthorized?.(request, verdict.agent);
  };
}
