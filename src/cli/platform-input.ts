// Turns a platform file (YAML or JSON) and/or flags into the admin API's platform body.
// The service validates the body (422 with its detail); here we only parse and reshape.
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { UsageError } from './errors.js';

export interface ScopeInput {
  name: string;
  description?: string;
}
export interface RouteInput {
  method: string;
  path: string;
  scopes: string[];
}
export type PlatformBody = Record<string, unknown>;

const SCOPE_CHARS = /^[A-Za-z0-9_.:\/-]+/;
const SCOPE_NAME = /^[A-Za-z0-9_.:\/-]+$/;

/**
 * `--scope NAME[:DESCRIPTION]`. Scope names may contain ':' themselves ("orders:read"), so:
 * - "NAME=DESCRIPTION" splits at the first '=' (names cannot contain '='): the unambiguous form;
 * - a value that is a valid scope name as a whole is just a name ("orders:read");
 * - otherwise the description starts after the last ':' before the first character that cannot be in a
 *   name ("orders:read:Read orders" gives orders:read / "Read orders").
 */
export function parseScopeFlag(value: string): ScopeInput {
  const eq = value.indexOf('=');
  if (eq > 0) return { name: value.slice(0, eq), description: value.slice(eq + 1) };
  if (SCOPE_NAME.test(value)) return { name: value };
  const run = SCOPE_CHARS.exec(value)?.[0] ?? '';
  const colon = run.lastIndexOf(':');
  if (colon <= 0) throw new UsageError(`--scope ${JSON.stringify(value)}: expected NAME, NAME:DESCRIPTION or NAME=DESCRIPTION`);
  return { name: value.slice(0, colon), description: value.slice(colon + 1) };
}

/** `--route "METHOD PATH [SCOPE,SCOPE...]"`, e.g. "GET /orders/{id} orders:read". */
export function parseRouteFlag(value: string): RouteInput {
  const parts = value.trim().split(/\s+/);
  if (parts.length < 2 || parts.length > 3) {
    throw new UsageError(`--route ${JSON.stringify(value)}: expected "METHOD PATH [SCOPE,SCOPE...]"`);
  }
  const [method, path, scopes = ''] = parts;
  return { method: method.toUpperCase(), path, scopes: scopes.split(',').filter(Boolean) };
}

/** Reads a platform file; "-" reads stdin. YAML is a superset of JSON, so one parser takes both. */
export function readPlatformFile(file: string): PlatformBody {
  let source: string;
  try {
    source = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  let data: unknown;
  try {
    data = parseYaml(source);
  } catch (error) {
    throw new UsageError(`${file} is not valid YAML or JSON: ${(error as Error).message.split('\n')[0]}`);
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    throw new UsageError(`${file} must hold a mapping with name, domain, scopes and routes`);
  }
  const body: PlatformBody = { ...(data as PlatformBody) };
  if (body.scopes !== undefined) body.scopes = fileScopes(body.scopes);
  return body;
}

/**
 * Scopes in a file: the API's list of {name, description}, or for convenience a mapping
 * `{ "orders:read": "Read orders" }`, list items `- "orders:read"` or `- orders:read: Read orders`.
 */
function fileScopes(scopes: unknown): unknown {
  const entry = (name: string, description: unknown) =>
    description === null || description === undefined ? { name } : { name, description };
  if (scopes !== null && typeof scopes === 'object' && !Array.isArray(scopes)) {
    return Object.entries(scopes).map(([name, description]) => entry(name, description));
  }
  if (!Array.isArray(scopes)) return scopes; // let the service say what is wrong
  return scopes.map((scope) => {
    if (typeof scope === 'string') return { name: scope };
    if (scope && typeof scope === 'object' && !('name' in scope)) {
      const keys = Object.entries(scope);
      if (keys.length === 1) return entry(keys[0][0], keys[0][1]);
    }
    return scope;
  });
}

export interface PlatformFlags {
  file?: string;
  name?: string;
  domain?: string;
  status?: string;
  verificationStatus?: string;
  scopes: string[];
  routes: string[];
  /** `--resource URI`, repeated: the platform's resource identifiers (replace the whole list). */
  resources?: string[];
}

/** The body: the file first, then each given flag replaces that field. */
export function platformBody(flags: PlatformFlags): PlatformBody {
  const body: PlatformBody = flags.file !== undefined ? readPlatformFile(flags.file) : {};
  if (flags.name !== undefined) body.name = flags.name;
  if (flags.domain !== undefined) body.domain = flags.domain;
  if (flags.status !== undefined) body.status = flags.status;
  if (flags.verificationStatus !== undefined) body.verification_status = flags.verificationStatus;
  if (flags.scopes.length) body.scopes = flags.scopes.map(parseScopeFlag);
  if (flags.routes.length) body.routes = flags.routes.map(parseRouteFlag);
  if (flags.resources?.length) body.resources = flags.resources;
  return body;
}
