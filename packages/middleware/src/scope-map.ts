// The platform's scope file (SvcScopesYaml): read once at start-up, validated with Ajv against the
// project's TypeBox schema, compiled into a route table that answers "which scopes does METHOD PATH need?".
// Three ways to ask, from the most to the least informed (see docs/client-and-middleware.md):
// - by the route template the framework itself matched (Fastify, an Express route guard): no re-matching;
// - by every rule the path could reach under any reading a router might apply (Express before routing);
// - by the canonical path (node:http), refusing paths with no single reading.
import { parse as parseYaml } from 'yaml';
import type { SvcScopesYaml } from '@agent-credential-exchange/protocol/scopes-file';
// Compiled ahead of time (the protocol package's scripts/generate-validators.mjs): no Ajv and no code
// generation at run time.
import { scopeFileProblems } from '@agent-credential-exchange/protocol/scope-file-validator';
import { canonicalizeTarget, looseSegment } from './canonical-path.js';

/** The scope file cannot be read or does not follow the contract's schema (thrown by createVerifier). */
export class ScopeFileError extends Error {
  readonly code = 'ERR_ACE_SCOPE_FILE';
  constructor(message: string) {
    super(message);
    this.name = 'ScopeFileError';
  }
}

/**
 * Where the scope file comes from: its YAML text or an already parsed document (every runtime), or a path
 * on disk (the Node entry point only: the runtime-neutral core reads no file).
 */
export type ScopeFileSource =
  | {
      /** Path of the platform's scope file (`GET /api/v1/platforms/{platform_id}/scopes.yaml`), read once at start-up. Node entry point only. */
      scopesFile: string;
    }
  | ScopeTextSource;
/** The scope file as the edge entry point takes it: text or parsed object, never a path. */
export type ScopeTextSource =
  | {
      /** The scope file's YAML text. */
      scopesYaml: string;
      /** Where `scopesYaml` came from, named in error messages. */
      scopesOrigin?: string;
    }
  | {
      /** The scope file already parsed (a plain object); validated like the text. */
      scopesDocument: unknown;
    };

export function loadScopeFile(source: ScopeTextSource): SvcScopesYaml {
  if ('scopesFile' in source) {
    throw new ScopeFileError('scopesFile (a path) is read by the Node entry point only: pass scopesYaml (the text) or scopesDocument');
  }
  let document: unknown;
  if ('scopesDocument' in source) {
    document = source.scopesDocument;
  } else {
    try {
      document = parseYaml(source.scopesYaml);
    } catch (error) {
      throw new ScopeFileError(`scope file ${source.scopesOrigin ?? 'scopesYaml'} is not valid YAML: ${(error as Error).message}`);
    }
  }
  const problems = scopeFileProblems(document);
  if (problems.length > 0) {
    throw new ScopeFileError(`scope file does not match the SvcScopesYaml schema: ${problems.join('; ')}`);
  }
  return document as SvcScopesYaml;
}

export interface RouteMatch {
  method: string;
  /** The template as written in the scope file, e.g. /orders/{id}. */
  path: string;
  scopes: string[];
}

/** How a request maps to the scope file. Anything but `rule` is refused by the verifier (`none` may pass
 * with `unmatchedRoutes: 'authenticate'`). */
export type RouteResolution =
  | { kind: 'rule'; rule: RouteMatch; /** canonical target, when resolved from a path */ canonical?: string }
  | { kind: 'none'; canonical?: string }
  | { kind: 'ambiguous'; reason: string }
  | { kind: 'bad-path'; reason: string };

/** Route template syntaxes understood by `resolveTemplate`. */
export type TemplateSyntax = 'scope-file' | 'fastify' | 'express';

/**
 * One segment of a template as its literal parts around its parameters: "{name}.json" is ["", ".json"],
 * "v{major}-{minor}" is ["v", "-", ""], "orders" is ["orders"]. Each parameter stands for one or more
 * characters of a segment.
 */
type SegmentPattern = readonly string[];

interface CompiledRoute extends RouteMatch {
  /** Exact (case-sensitive) per-segment patterns. */
  segments: SegmentPattern[];
  /** The same, case-folded (foldCase), for doubt detection and candidate search. */
  folded: SegmentPattern[];
  /** Per segment: 2 literal, 1 literal with a parameter, 0 parameter only. Higher wins, left to right. */
  rank: number[];
}

/** Splits a path into segments, ignoring one trailing slash ("/orders/" is "/orders"). */
function splitPath(path: string): string[] {
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  return trimmed === '/' ? [] : trimmed.slice(1).split('/');
}

const PARAM = /(\{[A-Za-z_][A-Za-z0-9_]*\})/;

function compileSegment(segment: string): { exact: SegmentPattern; folded: SegmentPattern; rank: number } {
  const parts = segment.split(PARAM).filter((p) => p !== '');
  const hasParam = parts.some((p) => p.startsWith('{'));
  // split() with a capturing group alternates literal, parameter, literal...: the even places are literals.
  const literals = segment.split(PARAM).filter((_, i) => i % 2 === 0);
  return { exact: literals, folded: literals.map(foldCase), rank: !hasParam ? 2 : parts.length > 1 ? 1 : 0 };
}

/**
 * Case-insensitive comparison as the most lenient router would make it (Unicode case: "ſ" reads as "s",
 * "K" (Kelvin) as "k"): upper then lower case, for the template's literals and the request's segments alike.
 */
function foldCase(value: string): string {
  return value.toUpperCase().toLowerCase();
}

/**
 * Whether a segment matches a pattern. No regular expression: a template segment with several parameters
 * ("{a}-{b}.json") would backtrack polynomially on a long segment that almost matches. Placing each literal
 * at its leftmost possible place leaves the most room for the rest, so one left-to-right pass decides.
 */
function matchesSegment(value: string, pattern: SegmentPattern): boolean {
  const last = pattern.length - 1;
  if (last === 0) return value === pattern[0];
  if (!value.startsWith(pattern[0])) return false;
  let position = pattern[0].length;
  for (let i = 1; i < last; i++) {
    const at = value.indexOf(pattern[i], position + 1); // the parameter before it takes one character at least
    if (at === -1) return false;
    position = at + pattern[i].length;
  }
  return value.length - pattern[last].length >= position + 1 && value.endsWith(pattern[last]);
}

/** "/orders/{id}" and "/orders/:orderId" both have the shape "/orders/{}": parameter names do not matter. */
function shapeOf(segments: string[]): string {
  return `/${segments.map((s) => s.replace(new RegExp(PARAM.source, 'g'), '{}')).join('/')}`;
}

/**
 * A framework's route template in scope-file shape, or undefined when it has parts the scope file cannot
 * express (wildcards, optional groups, regular expressions other than a Fastify parameter's constraint).
 */
export function templateShape(template: string, syntax: TemplateSyntax): string | undefined {
  if (!template.startsWith('/')) return undefined;
  let converted = template;
  if (syntax === 'fastify') {
    // "::" is a literal colon; ":id(^\\d+)" is a parameter with a constraint.
    if (/[{}]/.test(converted)) return undefined;
    converted = converted.replace(/::/g, '\u0000').replace(/:[A-Za-z_$][A-Za-z0-9_$]*(\((?:[^()\\]|\\.)*\))?/g, '{p}');
    if (/[*()]/.test(converted)) return undefined;
    converted = converted.replace(/\u0000/g, ':');
  } else if (syntax === 'express') {
    // path-to-regexp 8: ":name" or ':"name"' parameters; "{...}" optional groups and "*name" wildcards
    // have no scope-file equivalent.
    if (/[{}*()[\]?+!\\]/.test(converted)) return undefined;
    converted = converted.replace(/:(?:[A-Za-z_$][A-Za-z0-9_$]*|"[^"]*")/g, '{p}');
    if (converted.includes(':')) return undefined;
  }
  if (/[\s%]/.test(converted)) return undefined;
  return shapeOf(splitPath(converted));
}

export class RouteTable {
  private readonly byMethod = new Map<string, CompiledRoute[]>();
  private readonly byShape = new Map<string, RouteMatch>();

  constructor(routes: SvcScopesYaml['routes']) {
    // Two rules for the same method and shape: require the union of their scopes (the stricter reading).
    const merged = new Map<string, RouteMatch>();
    for (const route of routes) {
      const key = `${route.method} ${shapeOf(splitPath(route.path))}`;
      const seen = merged.get(key);
      if (seen) seen.scopes = [...new Set([...seen.scopes, ...route.scopes])];
      else merged.set(key, { method: route.method, path: route.path, scopes: [...new Set(route.scopes)] });
    }
    for (const [key, route] of merged) {
      this.byShape.set(key, route);
      const compiled = splitPath(route.path).map(compileSegment);
      const list = this.byMethod.get(route.method) ?? [];
      list.push({ ...route, segments: compiled.map((c) => c.exact), folded: compiled.map((c) => c.folded), rank: compiled.map((c) => c.rank) });
      this.byMethod.set(route.method, list);
    }
  }

  /** The rule for `method` and request target `url` under the canonical path policy, or undefined. */
  match(method: string, url: string): RouteMatch | undefined {
    const resolved = this.resolvePath(method, url);
    return resolved.kind === 'rule' ? resolved.rule : undefined;
  }

  /**
   * By path (node:http): canonicalise, then match exactly; literal segments beat parameters
   * (/orders/new before /orders/{id}). Refused as ambiguous when a looser reading of the same path
   * (case-folded, fully decoded, ";params" cut, trailing whitespace or dots dropped) names another rule.
   */
  resolvePath(method: string, target: string): RouteResolution {
    const canonical = canonicalizeTarget(target);
    if (!canonical.ok) return { kind: 'bad-path', reason: canonical.reason };
    const loose = canonical.segments.map((segment) => foldCase(looseSegment(segment)));
    let doubt = false;
    const rule = this.perMethod(method, (m) => {
      const exact = this.best(m, canonical.segments, 'segments');
      const folded = this.bestAll(m, loose, 'folded');
      if (folded.length > 1 || (folded[0] ?? undefined) !== exact) doubt = true;
      return exact;
    });
    if (doubt) return { kind: 'ambiguous', reason: 'The request path can be read as another route.' };
    const canonicalTarget = `${canonical.path}${canonical.query}`;
    return rule ? { kind: 'rule', rule, canonical: canonicalTarget } : { kind: 'none', canonical: canonicalTarget };
  }

  /**
   * By the template the framework matched (its own routing result). `templates` is several when one handler
   * serves several paths (Express arrays): each must have a rule, and the scopes of all are required.
   */
  resolveTemplate(method: string, templates: string | readonly string[] | undefined, syntax: TemplateSyntax): RouteResolution {
    const list = typeof templates === 'string' ? [templates] : templates;
    if (!list || list.length === 0) return { kind: 'none' };
    const rules: RouteMatch[] = [];
    for (const template of list) {
      if (typeof template !== 'string') return { kind: 'none' };
      const shape = templateShape(template, syntax);
      if (shape === undefined) return { kind: 'none' };
      const rule = this.perMethod(method, (m) => this.byShape.get(`${m} ${shape}`));
      if (!rule) return { kind: 'none' };
      rules.push(rule);
    }
    return { kind: 'rule', rule: union(rules) };
  }

  /**
   * By every rule the path could reach (Express, before its router ran): the raw and the percent-decoded
   * path, literals compared case-insensitively, one trailing slash optional. All their scopes are required,
   * since the router may run any of them (registration order, `next()`, case-sensitive or not).
   */
  resolveCandidates(method: string, target: string): RouteResolution {
    // Express would route "http://host/orders/export" by its path: refuse the absolute form outright.
    if (!target.startsWith('/')) return { kind: 'bad-path', reason: 'The request target must be an absolute path.' };
    const rawPath = target.split(/[?#]/, 1)[0] || '/';
    let decoded: string;
    try {
      decoded = decodeURIComponent(rawPath);
    } catch {
      return { kind: 'bad-path', reason: 'The request path has a malformed percent-escape.' };
    }
    const readings = [splitPath(rawPath), splitPath(decoded)].map((segments) => segments.map(foldCase));
    const rule = this.perMethod(method, (m) => {
      const found = new Set<CompiledRoute>();
      for (const segments of readings) for (const route of this.bestAll(m, segments, 'folded', true)) found.add(route);
      return found.size ? union([...found]) : undefined;
    });
    return rule ? { kind: 'rule', rule } : { kind: 'none' };
  }

  /** HEAD is answered by GET handlers in every framework: it needs the scopes of both rules. */
  private perMethod(method: string, find: (method: string) => RouteMatch | undefined): RouteMatch | undefined {
    const upper = method.toUpperCase();
    if (upper !== 'HEAD') {
      const found = find(upper);
      return found && union([found]);
    }
    const found = [find('HEAD'), find('GET')].filter((r): r is RouteMatch => r !== undefined);
    return found.length ? union(found, 'HEAD') : undefined;
  }

  private best(method: string, segments: string[], kind: 'segments' | 'folded'): CompiledRoute | undefined {
    return this.bestAll(method, segments, kind)[0];
  }

  /** The matching routes of the highest rank (or all matching routes with `all`). */
  private bestAll(method: string, segments: string[], kind: 'segments' | 'folded', all = false): CompiledRoute[] {
    let best: CompiledRoute[] = [];
    for (const route of this.byMethod.get(method) ?? []) {
      const patterns = route[kind];
      if (patterns.length !== segments.length) continue;
      if (!patterns.every((pattern, i) => matchesSegment(segments[i], pattern))) continue;
      if (all || best.length === 0 || sameRank(route.rank, best[0].rank)) best.push(route);
      else if (outranks(route.rank, best[0].rank)) best = [route];
    }
    return best;
  }
}

/** One rule requiring the scopes of all (the first names the route). */
function union(rules: RouteMatch[], method = rules[0].method): RouteMatch {
  if (rules.length === 1 && method === rules[0].method) return { method, path: rules[0].path, scopes: rules[0].scopes };
  return { method, path: rules[0].path, scopes: [...new Set(rules.flatMap((r) => r.scopes))] };
}

function sameRank(a: number[], b: number[]): boolean {
  return a.every((v, i) => v === b[i]);
}

function outranks(a: number[], b: number[]): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] > b[i];
  return false;
}
