// The HTTP layer's own request/reply shapes: handlers see these, never uWS objects.

export interface RequestHeaders {
  contentType: string;
  contentLength: string;
  ifNoneMatch: string;
  authorization: string;
  requestId: string;
  forwardedFor: string;
}

export interface HttpRequest {
  method: string;
  path: string;
  params: Record<string, string>;
  /** Raw query string (without `?`), for routes that declare `query: true`; else empty. */
  query: string;
  headers: RequestHeaders;
  /** Raw body (routes that declare `body: true`), at most the configured limit. */
  body: Buffer | null;
  /** Client address as the per-address limits count it (client-address.ts): IPv4, or an IPv6 /64. */
  address: string;
  requestId: string;
  /** Aborted when the client goes away: pass it to worker tasks. */
  signal: AbortSignal;
}

export interface HttpReply {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** For 304: the length of the representation the client already holds. */
  representationLength?: number;
}

export type Handler = (request: HttpRequest) => Promise<HttpReply> | HttpReply;

export interface Route {
  /** ANY: every method (used for guarded catch-alls such as /admin/v1/*). */
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'ANY';
  /** uWS pattern, e.g. /api/v1/platforms/:platform_id/scopes.yaml */
  path: string;
  /** Low-cardinality name for metrics and logs. */
  name: string;
  body?: boolean;
  /** The handler reads the query string (only then is it copied out of uWS). */
  query?: boolean;
  /** The handler reads Authorization (the OAuth token endpoint's client_secret_basic) on a listener that otherwise does not. */
  readsAuthorization?: boolean;
  handler: Handler;
}

export const JSON_HEADERS = { 'Content-Type': 'application/json' } as const;

/** Request bodies above this are refused with 413 (the token, listing and admin bodies are far smaller). */
export const MAX_BODY_BYTES = 16 * 1024;

export function json(status: number, value: unknown, headers: Record<string, string> = {}): HttpReply {
  return { status, headers: { ...JSON_HEADERS, ...headers }, body: JSON.stringify(value) };
}

/** Routes grouped by path pattern, in the order they were declared (405 answers need the group). */
export function routesByPath(routes: Route[]): Map<string, Route[]> {
  const byPath = new Map<string, Route[]>();
  for (const route of routes) byPath.set(route.path, [...(byPath.get(route.path) ?? []), route]);
  return byPath;
}

/** The Allow header of a 405 for a path served by `group`: its methods, GET bringing HEAD along. */
export function allowHeader(group: Route[]): string {
  return [...new Set(group.filter((r) => r.method !== 'ANY').flatMap((r) => (r.method === 'GET' ? ['GET', 'HEAD'] : [r.method])))].join(', ');
}
