// uWebSockets.js adapter: routing, 404/405, bounded body reading, abort handling, corked writes,
// metrics and access logs. Everything else happens in handlers that never see uWS.
import { STATUS_CODES } from 'node:http';
import { randomUUID } from 'node:crypto';
import * as uWS from 'uWebSockets.js';
import { ServiceError, toServiceError } from '../../core/errors.js';
import type { Logger } from '../telemetry/index.js';
import type { HttpMetrics } from './http-metrics.js';
import { clientAddress, type ProxyTrust } from '../../support/client-address.js';
import { httpStatus } from './errors.js';
import { framingRefusal, type FramingFields } from './framing.js';
import { InFlight, type Completion } from './in-flight.js';
import { LingeringRefusal } from './lingering-refusal.js';
import { inject, PathRouter, type InjectRequest, type InjectResponse, type ServedHandler, type ServedRequest, type ServedResponse } from './inject.js';
import { allowHeader, refusalReply, routesByPath, type Guard, type HttpReply, type HttpRequest, type RequestHeaders, type Route, type GuardKind, type RouteHooks } from './types.js';

/** The package silently falls back to a slow pure-JS server when its binary does not load: refuse that. */
export function assertNativeUws(): void {
  const source = Function.prototype.toString.call(uWS.App);
  if (!source.includes('[native code]')) {
    throw new Error('uWebSockets.js native binary did not load (pure-JS fallback detected); refusing to start. Check the platform and Node ABI.');
  }
}

export interface HttpServerOptions {
  /** The routes this listener serves. */
  routes: Route[];
  name: string;
  maxBodyBytes: number;
  /** Which X-Forwarded-For hop names the client (client-address.ts). */
  proxy: ProxyTrust;
  /**
   * A proxy may stand in front of this listener (the public one; TRUST_PROXY_* configure it). With proxy
   * trust off, a request carrying X-Forwarded-For is then counted and warned about: every client behind an
   * unannounced proxy shares the proxy's address, and one client's failed logins lock all of them out.
   */
  mayBeProxied?: boolean;
  metrics: HttpMetrics;
  logger: Logger;
  accessLog: boolean;
  /**
   * The check of each auth kind the routes declare (RouteDeclaration.auth): the `authorize` step of a route
   * that has none of its own (RouteHooks). Only routes that declare one read Authorization and the client
   * address for it.
   */
  guards?: Partial<Record<GuardKind, Guard>>;
  /** The uWS app to serve on, when it was made before the server (the revocation transmitter publishes on its topics); else a new one. */
  app?: uWS.TemplatedApp;
}

const STATUS_LINES = new Map<number, string>();
const statusLine = (status: number): string => {
  let line = STATUS_LINES.get(status);
  if (!line) STATUS_LINES.set(status, (line = `${status} ${STATUS_CODES[status] ?? 'Unknown'}`));
  return line;
};

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

type ForwardedIgnoredReason = 'untrusted_peer' | 'trust_proxy_off';
const FORWARDED_IGNORED_WARNINGS: Record<ForwardedIgnoredReason, string> = {
  untrusted_peer:
    'X-Forwarded-For ignored: the peer is not a trusted proxy (TRUST_PROXY_HOPS set with no proxy in front, or a proxy outside TRUST_PROXY_PEERS/TRUST_PROXY_CIDRS); the peer address counts',
  trust_proxy_off:
    'X-Forwarded-For ignored: TRUST_PROXY_HOPS=0 and no TRUST_PROXY_CIDRS; if a proxy is in front, every client behind it counts as its address (one client\'s failed logins lock them all out): set TRUST_PROXY_HOPS or TRUST_PROXY_CIDRS',
};

/**
 * The methods the service can name. Any other method (HTTP allows any token, of any length) becomes
 * `other` before it reaches a metric label, a log line, a handler or an audit event: a client must not
 * be able to mint series or rows with invented methods.
 */
const KNOWN_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
/** Each known method as uWS may report it (upper or lower case) -> the one canonical string. */
const CANONICAL_METHODS = new Map(KNOWN_METHODS.flatMap((m) => [[m, m], [m.toLowerCase(), m]] as const));
export const OTHER_METHOD = 'other';
export function knownMethod(raw: string): string {
  // Long invented methods are never upper-cased or copied: the length test comes first.
  if (raw.length > 7) return OTHER_METHOD;
  return CANONICAL_METHODS.get(raw) ?? CANONICAL_METHODS.get(raw.toUpperCase()) ?? OTHER_METHOD;
}
const NEVER_ABORTED = new AbortController().signal;
const decoder = new TextDecoder();

/** A route as this server serves it: its lifecycle steps and what it reads of a request, settled once. */
interface ServedRoute {
  route: Route;
  onRequest: RouteHooks['onRequest'];
  authorize: Guard | undefined;
  /** Authorization is copied out for the authorize step or for the route's own check (RouteCredentials). */
  readsAuthorization: boolean;
  /** The client address: where credentials arrive (a body not answered from memory) or are checked. */
  readsAddress: boolean;
  /** Work worth cancelling when the client goes away (worker tasks): a body not answered from memory. */
  cancellable: boolean;
}

/** One request being answered: what `send` needs besides the reply (one per request). */
interface Exchange {
  res: ServedResponse;
  state: Completion;
  /** Low-cardinality route name (metrics, access log). */
  routeName: string;
  method: string;
  /** performance.now() when the request arrived. */
  started: number;
  requestId: string;
}

export class HttpServer {
  readonly app: uWS.TemplatedApp;
  private listenSocket: uWS.us_listen_socket | undefined;
  private draining = false;
  private readonly inFlight = new InFlight();
  private readonly proxy: ProxyTrust;
  /** Ignored X-Forwarded-For headers since the last warning of each reason, and when that was. */
  private readonly ignoredForwarding = new Map<ForwardedIgnoredReason, { count: number; warnedAt: number }>();
  /** X-Forwarded-For would mean an unannounced proxy (mayBeProxied, and no TRUST_PROXY_* set). */
  private readonly proxyTrustOff: boolean;
  /** The same handlers uWS routes to, for requests served without a socket (inject). */
  private readonly router = new PathRouter();

  constructor(private readonly options: HttpServerOptions) {
    const { routes } = options;
    this.proxy = { ...options.proxy, onUntrustedPeer: (peer) => this.forwardingIgnored('untrusted_peer', peer) };
    this.proxyTrustOff = options.mayBeProxied === true && options.proxy.hops <= 0 && !options.proxy.proxies;
    this.app = options.app ?? uWS.App();
    const served = new Map<Route, ServedRoute>();
    for (const route of routes) {
      const guard = typeof route.auth === 'string' && route.auth !== 'none' ? route.auth : undefined;
      const authorize = route.hooks?.authorize ?? (guard ? options.guards?.[guard] : undefined);
      // Fail closed: a route that declares an auth kind this listener cannot check is never served.
      if (guard && !authorize) {
        throw new Error(`${options.name}: route ${route.method} ${route.path} declares auth "${guard}" but the listener has no guard for it`);
      }
      const heavyBody = route.body !== undefined && !route.body.answeredFromMemory;
      served.set(route, {
        route,
        onRequest: route.hooks?.onRequest,
        authorize,
        readsAuthorization: authorize !== undefined || typeof route.auth === 'object',
        readsAddress: heavyBody || authorize !== undefined,
        cancellable: heavyBody,
      });
    }
    for (const [path, routeGroup] of routesByPath(routes)) {
      const group = routeGroup.map((route) => served.get(route)!);
      const paramNames = path.split('/').filter((s) => s.startsWith(':')).map((s) => s.slice(1));
      const methodNotAllowed = refusalReply(new ServiceError('method_not_allowed'), { prebuilt: true, headers: { Allow: allowHeader(routeGroup) } });
      this.serve(path, (res, req) => {
        const fields = readFields(req);
        if (this.proxyTrustOff && fields.forwardedFor !== undefined) this.forwardingIgnored('trust_proxy_off', decoder.decode(res.getRemoteAddressAsText()));
        if (this.refusedFraming(res, req, fields)) return;
        const method = knownMethod(req.getMethod());
        const route = group.find(({ route: r }) => r.method === method || r.method === 'ANY' || (method === 'HEAD' && r.method === 'GET'));
        if (!route) {
          this.answerError(res, req, routeGroup[0].name, methodNotAllowed);
          return;
        }
        this.handle(res, req, route, paramNames, method, fields);
      });
    }
    // Made once: a flood of unknown paths builds no error, no stack, no JSON.
    const notFound = refusalReply(new ServiceError('not_found'), { prebuilt: true });
    this.serve('/*', (res, req) => {
      if (this.refusedFraming(res, req, readFields(req))) return;
      this.answerError(res, req, 'unmatched', notFound);
    });
  }

  private serve(pattern: string, handler: ServedHandler): void {
    this.app.any(pattern, handler);
    this.router.add(pattern, handler);
  }

  /**
   * Serves a request without a socket, through the handlers uWS calls (framing checks, body limit, guards,
   * hooks, metrics): what a client would get from this listener, for tests in process (inject.ts).
   */
  inject(request: InjectRequest): Promise<InjectResponse> {
    return inject(this.router, request);
  }

  /**
   * Every request passes here first: an ambiguous body length (request smuggling) is refused before any
   * routing or handler work, and the connection closes so no byte after it is served. `getHeader` shows
   * only a field's first occurrence, so all fields are read.
   *
   * The answer waits for the next turn of the event loop. uWS parses every request already received on
   * the connection before it flushes or closes anything, and a request handled now would reset the
   * "close after this answer" mark: the bytes after the refused request would be served as a request
   * of their own. Left pending instead, this answer makes uWS close the connection as soon as another
   * request follows on it (without our 400: the refusal is then the closed connection); if none
   * follows, the answer goes out next turn and the connection closes after it.
   */
  private refusedFraming(res: ServedResponse, req: ServedRequest, fields: HeaderFields): boolean {
    const refusal = framingRefusal(fields);
    if (!refusal) return false;
    const method = knownMethod(req.getMethod());
    const started = performance.now();
    const state = this.inFlight.begin();
    res.onAborted(() => {
      state.aborted = true;
      state.complete();
    });
    const reply = this.errorReply(new ServiceError(refusal.code, refusal.detail), 'framing');
    const exchange: Exchange = { res, state, routeName: 'framing', method, started, requestId: randomUUID() };
    setImmediate(() => this.send(exchange, reply, true));
    return true;
  }

  /**
   * uSockets listens with SO_REUSEPORT unless told otherwise, and the kernel then spreads connections over
   * every socket of the same user on that port: a second service started on a taken port would silently
   * take part of its traffic (seen: a test's JWKS request answered 404 by another service's internal
   * listener). Only the processes of one cluster share (`shared`); otherwise the port is exclusive and a
   * taken port fails here.
   */
  listen(host: string, port: number, shared = false): Promise<number> {
    return new Promise((resolve, reject) => {
      const onListen = (socket: uWS.us_listen_socket | false) => {
        if (!socket) return reject(new PortInUseError(this.options.name, host, port));
        this.listenSocket = socket;
        resolve(uWS.us_socket_local_port(socket));
      };
      // (host, port, options, callback): the native binding takes it, the typings list only (port, options, callback).
      const listen = this.app.listen as unknown as (host: string, port: number, options: number, cb: typeof onListen) => void;
      if (shared) this.app.listen(host, port, onListen);
      else listen.call(this.app, host, port, LIBUS_LISTEN_EXCLUSIVE_PORT, onListen);
    });
  }

  /**
   * Still accepting and answering, but every answer closes its connection (`Connection: close`): clients and
   * load balancers holding kept-alive connections to this process let go of them, one answer each, while
   * the listener is still open (the drain after SIGTERM).
   */
  closeConnectionsAfterAnswers(): void {
    this.draining = true;
  }

  /** Stops accepting connections; answers in flight get `Connection: close`. */
  stopAccepting(): void {
    this.draining = true;
    if (this.listenSocket) uWS.us_listen_socket_close(this.listenSocket);
    this.listenSocket = undefined;
  }

  /** Resolves when no request is in flight (or at the deadline). */
  idle(timeoutMs: number): Promise<void> {
    return this.inFlight.idle(timeoutMs);
  }

  /** Requests begun and not yet answered or aborted. */
  get requestsInFlight(): number {
    return this.inFlight.size;
  }

  /** Closes the listener and every connection. */
  closeAll(): void {
    this.stopAccepting();
    (this.app as unknown as { close?: () => void }).close?.();
  }

  /**
   * X-Forwarded-For ignored: counted, and logged at most once a minute per reason with how many since the
   * last line. `untrusted_peer`: from a peer that is no trusted proxy (TRUST_PROXY_HOPS set with no proxy in
   * front, or a proxy outside TRUST_PROXY_PEERS / TRUST_PROXY_CIDRS). `trust_proxy_off`: proxy trust is off,
   * so a proxy in front is unannounced and every client behind it counts as the proxy's address.
   */
  private forwardingIgnored(reason: ForwardedIgnoredReason, peer: string): void {
    this.options.metrics.forwardedForIgnored(reason);
    const seen = this.ignoredForwarding.get(reason) ?? { count: 0, warnedAt: -Infinity };
    seen.count++;
    const now = performance.now();
    if (now - seen.warnedAt < 60_000) {
      this.ignoredForwarding.set(reason, seen);
      return;
    }
    this.options.logger.warn({ peer, ignored: seen.count, listener: this.options.name }, FORWARDED_IGNORED_WARNINGS[reason]);
    this.ignoredForwarding.set(reason, { count: 0, warnedAt: now });
  }

  /**
   * The client address of a request this server does not route itself (the revocation WebSocket's
   * upgrade), by the same rules (TRUST_PROXY_*). Call it in the synchronous part of the handler.
   */
  clientAddressOf(res: uWS.HttpResponse, req: uWS.HttpRequest): string {
    const forwardedFor = this.options.proxy.hops > 0 || this.options.proxy.proxies ? req.getHeader('x-forwarded-for') : '';
    return clientAddress(forwardedFor, decoder.decode(res.getRemoteAddressAsText()), this.proxy);
  }

  /** The headers this route can use, from the one pass over the fields (readFields). */
  private readHeaders(fields: HeaderFields, { route, readsAuthorization }: ServedRoute): RequestHeaders {
    const body = route.body !== undefined;
    return {
      contentType: body ? (fields.contentType ?? '') : '',
      contentLength: body ? (fields.contentLength[0] ?? '') : '',
      ifNoneMatch: route.method === 'GET' ? (fields.ifNoneMatch ?? '') : '',
      authorization: readsAuthorization ? (fields.authorization ?? '') : '',
      requestId: fields.requestId ?? '',
      forwardedFor: body && (this.options.proxy.hops > 0 || this.options.proxy.proxies) ? (fields.forwardedFor ?? '') : '',
    };
  }

  private handle(res: ServedResponse, req: ServedRequest, served: ServedRoute, paramNames: string[], method: string, fields: HeaderFields): void {
    const { route, authorize } = served;
    const started = performance.now();
    // Everything from `req` must be read now: it is invalid after this synchronous part.
    const headers = this.readHeaders(fields, served);
    const params: Record<string, string> = {};
    paramNames.forEach((name, i) => (params[name] = decodeURIComponentSafe(req.getParameter(i) ?? '')));
    const path = req.getUrl();
    const query = route.query ? (req.getQuery() ?? '') : '';
    // The client address only matters where credentials arrive: routes with a body, and routes with an
    // auth check (the admin token limit; failed admin token checks are audited).
    const address = served.readsAddress ? clientAddress(headers.forwardedFor, decoder.decode(res.getRemoteAddressAsText()), this.proxy) : '';
    const requestId = REQUEST_ID.test(headers.requestId) ? headers.requestId : randomUUID();
    // Only routes with a body do work worth cancelling (worker tasks); the rest share an inert signal.
    const controller = served.cancellable ? new AbortController() : undefined;
    const state = this.inFlight.begin();
    res.onAborted(() => {
      state.aborted = true;
      controller?.abort();
      state.complete();
    });
    const exchange: Exchange = { res, state, routeName: route.name, method, started, requestId };

    // One object from the headers' hook to the handler (the hook may remember its verdict for it).
    const request: HttpRequest = { method, path, query, params, headers, body: null, address, requestId, signal: controller?.signal ?? NEVER_ABORTED };
    const run = (body: Buffer | null) => {
      request.body = body;
      let result: HttpReply | Promise<HttpReply>;
      try {
        result = authorize ? Promise.resolve(authorize(request)).then(() => route.handler(request)) : route.handler(request);
      } catch (error) {
        result = Promise.reject(error);
      }
      // Synchronous handlers (JWKS, health) answer at once, without a promise round.
      if (!(result instanceof Promise)) return this.send(exchange, result);
      // One reaction, not a catch-then chain (two promises per request).
      result.then(
        (r) => this.send(exchange, r),
        // A client that went away aborted its work: nothing to answer, nothing to log.
        (error: unknown) => {
          if (!state.aborted) this.send(exchange, this.errorReply(error, route.name));
        },
      );
    };

    // uWS still consumes the unread body of a request answered early (its parser knows the length).
    const early = served.onRequest?.(request);
    if (early) return this.send(exchange, early);
    if (!route.body) return run(null);

    // Bounded body: refuse early on a declared length, else count while reading; 413 closes the connection.
    const limit = this.options.maxBodyBytes;
    const declared = Number(headers.contentLength);
    if (headers.contentLength !== '' && Number.isFinite(declared) && declared > limit) {
      return this.send(exchange, this.errorReply(new ServiceError('payload_too_large'), route.name), true);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let refusal: LingeringRefusal | undefined;
    res.onData((chunk, isLast) => {
      if (refusal) return refusal.received(chunk.byteLength, isLast);
      size += chunk.byteLength;
      if (size > limit) {
        // Closing now, with the client's bytes still unread, makes the kernel send a reset that can
        // destroy the 413 before the client reads it: discard the rest first (bounded), then answer.
        const refuse = () => this.send(exchange, this.errorReply(new ServiceError('payload_too_large'), route.name), true);
        refusal = new LingeringRefusal({ answer: refuse, finished: () => state.done });
        return refusal.received(0, isLast);
      }
      chunks.push(Buffer.from(Buffer.from(chunk))); // copy: uWS detaches the chunk after this callback
      if (isLast) run(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
    });
  }

  private errorReply(error: unknown, routeName: string): HttpReply {
    const serviceError = toServiceError(error);
    if (!(error instanceof ServiceError) && httpStatus(serviceError) >= 500) {
      // Log the failure without request data: bodies may hold secrets.
      this.options.logger.error({ route: routeName, err: { message: (error as Error)?.message, name: (error as Error)?.name } }, 'request failed');
    }
    return refusalReply(serviceError);
  }

  private answerError(res: ServedResponse, req: ServedRequest, routeName: string, reply: HttpReply): void {
    const method = knownMethod(req.getMethod());
    const started = performance.now();
    const requestId = randomUUID();
    const state = this.inFlight.begin();
    // uWS 20.30 aborts the whole process when a handler ends a response (HEAD: endWithoutBody) without
    // an abort handler attached: always attach one, even for answers given at once.
    res.onAborted(() => {
      state.aborted = true;
      state.complete();
    });
    // Drop any request body unread: answer at once and let uWS discard the rest.
    this.send({ res, state, routeName, method, started, requestId }, reply);
  }

  private send(exchange: Exchange, reply: HttpReply, closeConnection = false): void {
    const { res, state, method } = exchange;
    if (state.done) return;
    const body = reply.body ?? '';
    const close = closeConnection || this.draining;
    res.cork(() => {
      res.writeStatus(statusLine(reply.status));
      res.writeHeader('X-Request-Id', exchange.requestId);
      if (reply.headers) for (const name in reply.headers) res.writeHeader(name, reply.headers[name]);
      // 304 and HEAD carry no body; their Content-Length is the full representation's (RFC 9110 §8.6).
      if (reply.status === 304 || method === 'HEAD') {
        const length = reply.status === 304 ? (reply.representationLength ?? 0) : typeof body === 'string' ? Buffer.byteLength(body) : body.length;
        endWithoutBody(res, length, close);
      } else res.end(body, close);
    });
    state.complete();
    const seconds = (performance.now() - exchange.started) / 1000;
    this.options.metrics.observeHttp(exchange.routeName, method, reply.status, seconds);
    if (this.options.accessLog) {
      this.options.logger.info({ reqId: exchange.requestId, route: exchange.routeName, method, status: reply.status, ms: Math.round(seconds * 1e4) / 10 }, 'request');
    }
  }
}

/**
 * A bodiless answer (HEAD, 304) announcing the representation's length. `res.endWithoutBody(length)` in
 * this uWS waits for `length` body bytes that never come: the response stays open, the next request on
 * the connection closes it and `onAborted` fires after the answer. So the length goes in as a plain
 * header and uWS ends the response with no length of its own. uWS cannot close the connection after
 * such an answer, so a closing one (shutdown) says `Connection: close` and the final close ends it.
 */
function endWithoutBody(res: ServedResponse, length: number, close: boolean): void {
  res.writeHeader('Content-Length', String(length));
  if (close) res.writeHeader('Connection', 'close');
  res.endWithoutBody();
}

/**
 * Every header field a request has, read in one pass: the framing fields in full (a second Content-Length
 * must be seen; `getHeader` shows only a field's first occurrence) and the first occurrence of the others a
 * route may use (what `getHeader` would answer, without one call into C++ per field).
 */
interface HeaderFields extends FramingFields {
  contentType?: string;
  authorization?: string;
  requestId?: string;
  ifNoneMatch?: string;
  forwardedFor?: string;
}

function readFields(req: ServedRequest): HeaderFields {
  const fields: HeaderFields = { contentLength: [], transferEncoding: [] };
  req.forEach((name, value) => {
    switch (name) {
      case 'content-length':
        fields.contentLength.push(value);
        break;
      case 'transfer-encoding':
        fields.transferEncoding.push(value);
        break;
      case 'content-type':
        fields.contentType ??= value;
        break;
      case 'authorization':
        fields.authorization ??= value;
        break;
      case 'x-request-id':
        fields.requestId ??= value;
        break;
      case 'if-none-match':
        fields.ifNoneMatch ??= value;
        break;
      case 'x-forwarded-for':
        fields.forwardedFor ??= value;
        break;
    }
  });
  return fields;
}

function decodeURIComponentSafe(value: string): string {
  if (!value.includes('%')) return value;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}


/** uSockets' listen option for a port of its own (exported by the binary, missing from the repack's typings). */
const LIBUS_LISTEN_EXCLUSIVE_PORT = (uWS as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT?: number }).LIBUS_LISTEN_EXCLUSIVE_PORT ?? 1;

/** A listener could not bind its port: another process holds it (or the address is not this host's). */
export class PortInUseError extends Error {
  readonly code = 'ERR_ACE_PORT_IN_USE';
  constructor(listener: string, host: string, port: number) {
    super(`${listener}: cannot listen on ${host}:${port}: the port is in use by another process (or ${host} is not an address of this host)`);
    this.name = 'PortInUseError';
  }
}
