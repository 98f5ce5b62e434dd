// The HTTP layer's own request/reply shapes: handlers see these, never uWS objects; and the route
// declaration, the one place a route's method, path, schemas, auth, audit and answers are stated.
import type { TObject, TSchema } from '@sinclair/typebox';
import type { EventType } from '../../core/audit/events.js';
import type { ServiceError } from '../../core/errors.js';
import { errorBody, errorHeaders, httpStatus } from './errors.js';

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
  /** Raw query string (without `?`), for routes that declare `query`; else empty. */
  query: string;
  headers: RequestHeaders;
  /** Raw body (routes that declare `body`), at most the configured limit. */
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

/** An auth check run before a route's handler: resolves to let the request through, throws a ServiceError to refuse. */
export type Guard = (request: HttpRequest) => Promise<void> | void;

export type RouteMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'ANY';

/** A check the listener runs for every route that declares it (HttpServerOptions.guards). */
export type GuardKind = 'admin_bearer';

/**
 * HTTP credentials a route checks in its own steps (`onRequest` or the handler: OAuth client_secret_basic,
 * whose credentials may also come in the body; a feed token): the server copies Authorization out for
 * them, and the document names these schemes (OpenAPI security scheme objects by name; `optional`: the
 * request may carry none).
 */
export interface RouteCredentials {
  schemes: Record<string, Record<string, unknown>>;
  optional: boolean;
}

/**
 * Who may call a route: anyone, the listener's guard of a kind (the server refuses to start with a route
 * whose guard is missing, so a declaration cannot be served unguarded by mistake), or credentials the
 * route checks itself.
 */
export type RouteAuth = 'none' | GuardKind | RouteCredentials;

/** What a route writes to the audit trail (docs/audit.md); shown in the OpenAPI document as x-audit. */
export type RouteAudit =
  | { kind: 'none' }
  /** Recorded in the next batch, the answer does not wait for it. */
  | { kind: 'batched'; events: EventType[] }
  /** The answer waits until the event is durable (the change itself is already made). */
  | { kind: 'before_answer'; events: EventType[] };

export interface ResponseHeaderSpec {
  description?: string;
  schema: TSchema;
}

/** One documented answer. `content` absent: no body (101, 204, 304). */
export interface ResponseSpec {
  description: string;
  /** Media type -> schema of the body. */
  content?: Record<string, TSchema>;
  headers?: Record<string, ResponseHeaderSpec>;
}

export interface RouteBody {
  schema: TSchema;
  contentType: 'application/json' | 'application/x-www-form-urlencoded';
  required: boolean;
  /**
   * The body is answered from memory (the revocation poll): the server gives the handler no cancellation
   * signal and computes no client address for it, so a flood of it costs what a cached document costs.
   * Other bodies may carry credentials or start worker tasks: those get both.
   */
  answeredFromMemory?: boolean;
}

/**
 * A route as data: what the server needs to serve it (method, path, body, query, auth) and everything the
 * OpenAPI document says about it. The document is generated from these declarations (openapi/document.ts),
 * so nothing here is typed twice.
 */
export interface RouteDeclaration {
  /** ANY: every method (used for guarded catch-alls such as /admin/v1/*). */
  method: RouteMethod;
  /** uWS pattern, e.g. /api/v1/platforms/:platform_id/scopes.yaml */
  path: string;
  /** Low-cardinality name for metrics and logs. */
  name: string;
  /** OpenAPI operationId; only declarations that have one are documented (catch-alls have none). */
  operationId?: string;
  summary: string;
  description?: string;
  /** Path parameters by name (each `:name` of the path). */
  params?: Record<string, TSchema>;
  /** Query parameters (an object schema): only then is the query string copied out of uWS. */
  query?: TObject;
  /** A request body: only then is it read. `required: false` means an empty body is accepted. */
  body?: RouteBody;
  auth: RouteAuth;
  audit: RouteAudit;
  /** Status -> answer. Refusals use `refusals()` (errors.ts codes with the contract's Error shape). */
  responses: Record<number, ResponseSpec>;
  /** Served by the WebSocket upgrade handler, not by HttpServer (documented with its 101 answer). */
  upgrade?: 'websocket';
}

/**
 * Runs on the headers, before a body is read (fastify's onRequest): an answer it returns is sent at once and
 * the body is never read (the refusal of a poll with a wrong feed token costs no body handling).
 */
export type OnRequest = (request: HttpRequest) => HttpReply | undefined;

/**
 * A request's one lifecycle, in this order; a step that answers (or throws a refusal) ends it there:
 *   1. `onRequest`, on the headers alone;
 *   2. the body, read by the server within the size limit (routes that declare one);
 *   3. `authorize`: the route's own, else the listener's guard for the route's `auth` kind (HttpServerOptions.guards);
 *   4. the handler: reads the request, calls the core, renders;
 *   5. the server's answer: metrics, access log, `X-Request-Id` (every answer, refusals included).
 */
export interface RouteHooks {
  onRequest?: OnRequest;
  authorize?: Guard;
}

export interface Route extends RouteDeclaration {
  handler: Handler;
  hooks?: RouteHooks;
}

/** Joins declarations to their handlers (and hooks): the compiler insists on one handler per declared route. */
export function bindRoutes<K extends string>(
  table: Record<K, RouteDeclaration>,
  handlers: Record<K, Handler>,
  hooks: Partial<Record<K, RouteHooks>> = {},
): Route[] {
  return (Object.keys(table) as K[]).map((key) => ({ ...table[key], handler: handlers[key], hooks: hooks[key] }));
}

export const JSON_HEADERS = { 'Content-Type': 'application/json' } as const;

/**
 * A refusal as an answer: the contract's Error shape, never cached, with Retry-After when the error has a
 * wait, and `headers` of the answer's own (Allow). `prebuilt`: the body as bytes, for an answer made once
 * and sent many times (no string encoding per answer).
 */
export function refusalReply(error: ServiceError, options: { prebuilt?: boolean; headers?: Record<string, string> } = {}): HttpReply {
  const body = errorBody(error);
  return {
    status: httpStatus(error),
    headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...errorHeaders(error), ...options.headers },
    body: options.prebuilt ? Buffer.from(body) : body,
  };
}

/** Request bodies above this are refused with 413 (the token, listing and admin bodies are far smaller). */
export const MAX_BODY_BYTES = 16 * 1024;

export function json(status: number, value: unknown, headers: Record<string, string> = {}): HttpReply {
  return { status, headers: { ...JSON_HEADERS, ...headers }, body: JSON.stringify(value) };
}

/** Routes grouped by path pattern, in the order they were declared (405 answers need the group). */
export function routesByPath<R extends Pick<Route, 'method' | 'path'>>(routes: R[]): Map<string, R[]> {
  const byPath = new Map<string, R[]>();
  for (const route of routes) byPath.set(route.path, [...(byPath.get(route.path) ?? []), route]);
  return byPath;
}

/** The Allow header of a 405 for a path served by `group`: its methods, GET bringing HEAD along. */
export function allowHeader(group: Pick<Route, 'method'>[]): string {
  return [...new Set(group.filter((r) => r.method !== 'ANY').flatMap((r) => (r.method === 'GET' ? ['GET', 'HEAD'] : [r.method])))].join(', ');
}
