// The platform's scope file (SvcScopesYaml): read once at start-up, validated with Ajv against the
// project's TypeBox schema, compiled into a route table that answers "which scopes does METHOD PATH need?".
import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import * as ajvFormats from 'ajv-formats';
import { parse as parseYaml } from 'yaml';
import { SvcScopesYaml } from '../schemas/scopes-file.js';

// ajv-formats is CommonJS with `exports.default`; under NodeNext the plugin function sits on `.default`.
const addFormats = ajvFormats.default as unknown as (ajv: Ajv, formats: string[]) => Ajv;

// An Ajv instance of our own: the service's shared instance may already hold a schema with the same $id,
// and a middleware embedded in another program must not depend on that state.
let validateScopesFile: ReturnType<Ajv['compile']> | undefined;
function validator() {
  if (!validateScopesFile) {
    const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
    addFormats(ajv, ['uuid']);
    validateScopesFile = ajv.compile(SvcScopesYaml);
  }
  return validateScopesFile;
}

export class ScopeFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ScopeFileError';
  }
}

/** Where the scope file comes from: a path on disk, its YAML text, or an already parsed document. */
export type ScopeFileSource = { scopesFile: string } | { scopesYaml: string } | { scopesDocument: unknown };

export function loadScopeFile(source: ScopeFileSource): SvcScopesYaml {
  let document: unknown;
  if ('scopesDocument' in source) {
    document = source.scopesDocument;
  } else {
    const origin = 'scopesFile' in source ? source.scopesFile : 'scopesYaml';
    const text = 'scopesFile' in source ? readFileSync(source.scopesFile, 'utf8') : source.scopesYaml;
    try {
      document = parseYaml(text);
    } catch (error) {
      throw new ScopeFileError(`scope file ${origin} is not valid YAML: ${(error as Error).message}`);
    }
  }
  const validate = validator();
  if (!validate(document)) {
    const problems = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`);
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

interface CompiledRoute extends RouteMatch {
  segments: RegExp[];
  /** Per segment: 2 literal, 1 literal with a parameter, 0 parameter only. Higher wins, left to right. */
  rank: number[];
}

/** Splits a path into segments, ignoring one trailing slash ("/orders/" is "/orders"). */
function splitPath(path: string): string[] {
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  return trimmed === '/' ? [] : trimmed.slice(1).split('/');
}

function compileSegment(segment: string): { pattern: RegExp; rank: number } {
  const parts = segment.split(/(\{[A-Za-z_][A-Za-z0-9_]*\})/).filter((p) => p !== '');
  const hasParam = parts.some((p) => p.startsWith('{'));
  const source = parts.map((p) => (p.startsWith('{') ? '[^/]+' : p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('');
  return { pattern: new RegExp(`^${source}$`), rank: !hasParam ? 2 : parts.length > 1 ? 1 : 0 };
}

export class RouteTable {
  private readonly byMethod = new Map<string, CompiledRoute[]>();

  constructor(routes: SvcScopesYaml['routes']) {
    // Two rules for the same method and template: require the union of their scopes (the stricter reading).
    const merged = new Map<string, RouteMatch>();
    for (const route of routes) {
      const key = `${route.method} ${splitPath(route.path).join('/')}`;
      const seen = merged.get(key);
      if (seen) seen.scopes = [...new Set([...seen.scopes, ...route.scopes])];
      else merged.set(key, { method: route.method, path: route.path, scopes: [...new Set(route.scopes)] });
    }
    for (const route of merged.values()) {
      const compiled = splitPath(route.path).map(compileSegment);
      const list = this.byMethod.get(route.method) ?? [];
      list.push({ ...route, segments: compiled.map((c) => c.pattern), rank: compiled.map((c) => c.rank) });
      this.byMethod.set(route.method, list);
    }
  }

  /**
   * The rule for `method` and the request target `url` (query and fragment ignored), or undefined.
   * Literal segments beat parameters (/orders/new before /orders/{id}). HEAD falls back to GET's rule,
   * as HTTP servers answer HEAD with the GET handler.
   */
  match(method: string, url: string): RouteMatch | undefined {
    const upper = method.toUpperCase();
    const found = this.find(upper, url);
    return found ?? (upper === 'HEAD' ? this.find('GET', url) : undefined);
  }

  private find(method: string, url: string): RouteMatch | undefined {
    const candidates = this.byMethod.get(method);
    if (!candidates) return undefined;
    const path = url.split(/[?#]/, 1)[0] || '/';
    if (!path.startsWith('/')) return undefined;
    const segments = splitPath(path);
    let best: CompiledRoute | undefined;
    for (const route of candidates) {
      if (route.segments.length !== segments.length) continue;
      if (!route.segments.every((pattern, i) => pattern.test(segments[i]))) continue;
      if (!best || outranks(route.rank, best.rank)) best = route;
    }
    return best && { method: best.method, path: best.path, scopes: best.scopes };
  }
}

function outranks(a: number[], b: number[]): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] > b[i];
  return false;
}
