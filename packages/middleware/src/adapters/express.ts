// Express adapters. Sets `req.agent` for authorized requests, and `req.auth` (the MCP SDK's AuthInfo, which
// its Streamable HTTP transport hands to tool handlers as `extra.authInfo`). Structural types only, so the package does
// not need express (or its types) at run time. Two wirings (docs/client-and-middleware.md):
//
// - `app.use(expressAgentAuth(verifier))`, before the routes. It runs before Express has routed, and
//   Express may run any route whose pattern matches (case-insensitively by default, with an optional
//   trailing slash, in registration order, several when a handler calls next()). So it requires the
//   scopes of EVERY rule the path could reach, under any of those readings (RouteTable.resolveCandidates).
// - `expressRouteGuard(verifier)` as the first handler of a route (`app.get('/orders/:id', guard, h)`).
//   It runs after Express routed and looks the rule up by the route's own template (`req.route.path`):
//   exactly the scopes of the handler that runs.
import type { AgentClaims, AuthorizeResult, RouteTarget, Verifier } from '../verifier.js';
import { mcpAuthInfo, type McpAuthInfo } from '../auth-info.js';

export interface ExpressLikeRequest {
  method: string;
  /** Express keeps the full path here even inside a mounted router. */
  originalUrl?: string;
  url: string;
  /** The path a router was mounted at, as matched (Express sets it inside routers). */
  baseUrl?: string;
  /** The matched route (set by Express while a route's handlers run). */
  route?: { path?: unknown };
  headers: { authorization?: string | string[] | undefined };
  agent?: AgentClaims | undefined;
  /** Typed by the MCP SDK's own declaration merging where it is installed; set here either way. */
  auth?: McpAuthInfo | undefined;
}

export interface ExpressLikeResponse {
  status(code: number): ExpressLikeResponse;
  set(headers: Record<string, string>): ExpressLikeResponse;
  // `any`, not `string`: Express infers a route's response body type from every handler of the route, and
  // a guard saying `string` would make the next handler's `res.json({...})` a type error (TS2345).
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  send(body: any): unknown;
}

declare global {
  // Declaration merging into @types/express's Request (a no-op without it). Optional, as at run time: set on
  // every request the middleware lets through, absent on a route it does not cover. `agentOf(req)` (or the
  // `hasAgent(req)` guard) narrows it. `req.auth` is not declared here: the MCP SDK declares it.
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      agent?: AgentClaims;
    }
  }
}

export type ExpressLikeNext = (error?: unknown) => void;

export interface ExpressRouteGuardOptions {
  /**
   * Template of the mount path in scope-file syntax, e.g. "/shops/{shop}", for routers mounted at a path
   * with parameters. Without it the guard prefixes `req.baseUrl`, which is right for fixed mount paths.
   */
  prefix?: string;
}

function run(
  verifier: Verifier,
  req: ExpressLikeRequest,
  res: ExpressLikeResponse,
  next: ExpressLikeNext,
  target: RouteTarget,
): void {
  // The path too: the RFC 9728 metadata is answered by path, whichever route (if any) Express matched.
  const path = req.originalUrl ?? req.url;
  verifier.authorize({ method: req.method, path, target, authorization: req.headers.authorization }).then((result: AuthorizeResult) => {
    if (!result.ok) {
      res.status(result.status).set({ ...result.headers, 'content-type': 'application/json', 'cache-control': 'no-store' }).send(result.body);
      return;
    }
    req.agent = result.claims;
    req.auth = mcpAuthInfo(result.claims);
    next();
  }, next);
}

/**
 * App-level middleware, before the routes: requires the scopes of every rule the path could reach.
 *
 * @example
 * app.use(expressAgentAuth(verifier));
 * app.get('/orders/:id', (req, res) => res.json({ agent: agentOf(req).agentId }));
 */
export function expressAgentAuth(verifier: Verifier) {
  return (req: ExpressLikeRequest, res: ExpressLikeResponse, next: ExpressLikeNext): void =>
    run(verifier, req, res, next, { kind: 'candidates', path: req.originalUrl ?? req.url });
}

/**
 * Route-level guard: exactly the matched route's scopes.
 *
 * @example
 * const guard = expressRouteGuard(verifier);
 * app.get('/orders/export', guard, exportHandler);
 * app.get('/orders/:id', guard, readHandler);
 */
export function expressRouteGuard(verifier: Verifier, options: ExpressRouteGuardOptions = {}) {
  return (req: ExpressLikeRequest, res: ExpressLikeResponse, next: ExpressLikeNext): void => {
    const path = req.route?.path;
    // Not inside a route (mounted with app.use), or a RegExp route: nothing to look up, so no rule.
    const templates = typeof path === 'string' ? [path] : Array.isArray(path) && path.every((p) => typeof p === 'string') ? (path as string[]) : undefined;
    const prefix = options.prefix !== undefined ? options.prefix.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, ':$1') : (req.baseUrl ?? '');
    // The mount path as matched is part of the URL, not a template: anything but plain characters in it
    // (":", "%", "*" ...) could read as template syntax, so such a route maps to no rule.
    const plainMount = options.prefix !== undefined || /^[A-Za-z0-9\-._~/]*$/.test(prefix);
    const full = plainMount ? templates?.map((t) => `${prefix}${t === '/' && prefix ? '' : t}`) : undefined;
    run(verifier, req, res, next, { kind: 'template', template: full, syntax: 'express' });
  };
}
