// Which scope-file rule a request reaches, asked the way the adapter can answer best (RouteTarget), with the
// answer for a request target remembered: it is a pure function of the scope file, so a path asked again (the
// same URL of a busy route) is not canonicalised and matched again. Bounded.
import type { RouteResolution, RouteTable, TemplateSyntax } from './scope-map.js';

/**
 * How the verifier finds the scope-file rule of a request:
 * - `template`: the route template the framework matched (Fastify's routeOptions.url, Express's req.route.path);
 *   looked up by method and shape, never re-matched. No template (a 404) or one the scope file lacks: no rule.
 * - `candidates`: the request target, before any router ran; every rule it could reach is required.
 * - `path`: the request target, canonicalised (canonical-path.ts) and matched exactly.
 */
export type RouteTarget =
  | { kind: 'template'; template: string | readonly string[] | undefined; syntax: TemplateSyntax }
  | { kind: 'candidates'; path: string }
  | { kind: 'path'; path: string };

/** Request targets whose rule is remembered (resolve), and the longest one remembered. */
const MAX_MEMO_PATHS = 1024;
const MAX_MEMO_PATH_LENGTH = 512;

/** RouteTable.resolve* by target kind, memoised for paths. */
export function routeResolver(routes: RouteTable): (method: string, target: RouteTarget) => RouteResolution {
  const resolved = new Map<string, RouteResolution>();
  return function resolve(method: string, target: RouteTarget): RouteResolution {
    if (target.kind === 'template') return routes.resolveTemplate(method, target.template, target.syntax);
    const memo = target.path.length <= MAX_MEMO_PATH_LENGTH ? `${target.kind} ${method} ${target.path}` : undefined;
    const seen = memo === undefined ? undefined : resolved.get(memo);
    if (seen) return seen;
    const resolution = target.kind === 'candidates' ? routes.resolveCandidates(method, target.path) : routes.resolvePath(method, target.path);
    if (memo !== undefined) {
      if (resolved.size >= MAX_MEMO_PATHS) resolved.delete(resolved.keys().next().value!);
      resolved.set(memo, resolution);
    }
    return resolution;
  };
}
