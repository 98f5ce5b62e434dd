// Hono helper: `app.use('*', honoAgentAuth(verifier))`, then `c.get('agent')` in handlers (declare the
// variable with `new Hono<AgentEnv>()`). No hono import: the context is typed structurally.
import type { AgentClaims, Verifier } from '../verifier.js';
import type { McpAuthInfo } from '../auth-info.js';
import { fetchAgentAuth } from './fetch.js';

/**
 * Hono's Env for apps using the helper: `new Hono<AgentEnv>()` types `c.get('agent')` and `c.get('auth')`
 * (the MCP SDK's AuthInfo: `transport.handleRequest(c.req.raw, { authInfo: c.get('auth') })`).
 */
export interface AgentEnv {
  Variables: { agent: AgentClaims; auth: McpAuthInfo };
}

/** The part of Hono's Context the helper uses. */
export interface HonoLikeContext {
  req: { raw: Request };
  set(key: 'agent' | 'auth', value: AgentClaims | McpAuthInfo): void;
}

export function honoAgentAuth(verifier: Verifier) {
  const auth = fetchAgentAuth(verifier);
  return async (c: HonoLikeContext, next: () => Promise<void>): Promise<Response | void> => {
    const verdict = await auth(c.req.raw);
    if (verdict instanceof Response) return verdict;
    // Hono routes on the request's own URL, which the WHATWG parser normalised as the check did; a path
    // with no single reading was refused above.
    c.set('agent', verdict.agent);
    c.set('auth', verdict.auth);
    await next();
  };
}
