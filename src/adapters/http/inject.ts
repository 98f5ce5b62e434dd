// A request served without a socket (fastify's `inject`): HttpServer hands it to the very handler uWS would
// call, through a request and a response object that answer the few calls the server makes of uWS. Routing
// follows uWS's router (a static segment before a parameter before a wildcard, the first full match in that
// order wins), so a test in process sees the framing checks, body limits, guards and hooks a client sees.
// What uWS itself does before any handler (parsing the request line, decoding chunked bodies, header
// limits) is not here: that is tested over real sockets.

/** The calls the server makes of a uWS request (uWS.HttpRequest has them; InjectedRequest too). */
export interface ServedRequest {
  getMethod(): string;
  getUrl(): string;
  getQuery(): string | undefined;
  getParameter(index: number): string | undefined;
  forEach(callback: (name: string, value: string) => void): void;
}

/** The calls the server makes of a uWS response. */
export interface ServedResponse {
  onAborted(handler: () => void): unknown;
  onData(handler: (chunk: ArrayBuffer, isLast: boolean) => void): unknown;
  cork(callback: () => void): unknown;
  writeStatus(status: string): unknown;
  writeHeader(name: string, value: string): unknown;
  end(body?: string | Buffer, closeConnection?: boolean): unknown;
  endWithoutBody(): unknown;
  getRemoteAddressAsText(): ArrayBuffer;
}

export type ServedHandler = (res: ServedResponse, req: ServedRequest) => void;

export interface InjectRequest {
  method: string;
  /** Path and query, e.g. `/api/v1/platforms/x/scopes.yaml?a=b`. */
  url: string;
  /** Field name -> value (an array: the field repeated), or [name, value] pairs in order. */
  headers?: Record<string, string | string[]> | [string, string][];
  /** Sent as is; an object is sent as JSON. Content-Length is added unless a length or coding is given. */
  body?: string | Buffer | object;
  /** The body in these pieces, as a socket would deliver them (default: one piece). */
  chunks?: number;
  /** The peer's address as uWS reports it (default 127.0.0.1). */
  remoteAddress?: string;
}

export interface InjectResponse {
  status: number;
  /** Header names in lower case, as fetch shows them (repeated fields joined by ", "). */
  headers: Record<string, string>;
  body: string;
  /** The server closes the connection after this answer. */
  closed: boolean;
  /** The body as JSON (throws when it is not). */
  json<T = unknown>(): T;
}

interface RegisteredPath {
  segments: string[];
  handler: ServedHandler;
}

/** uWS's router over the registered patterns: `:name` one segment, a trailing `*` the rest. */
export class PathRouter {
  private readonly paths: RegisteredPath[] = [];

  add(pattern: string, handler: ServedHandler): void {
    this.paths.push({ segments: pattern.split('/').slice(1), handler });
  }

  match(path: string): { handler: ServedHandler; params: string[] } | undefined {
    const segments = path.split('/').slice(1);
    const search = (candidates: RegisteredPath[], depth: number, params: string[]): { handler: ServedHandler; params: string[] } | undefined => {
      const done = candidates.find((c) => c.segments.length === depth && depth === segments.length);
      if (done) return { handler: done.handler, params };
      if (depth < segments.length) {
        const here = segments[depth];
        const statics = candidates.filter((c) => c.segments.length > depth && c.segments[depth] === here);
        const found = statics.length ? search(statics, depth + 1, params) : undefined;
        if (found) return found;
        const named = candidates.filter((c) => c.segments.length > depth && c.segments[depth].startsWith(':'));
        const param = named.length ? search(named, depth + 1, [...params, here]) : undefined;
        if (param) return param;
      }
      const wildcard = candidates.find((c) => c.segments.length === depth + 1 && c.segments[depth] === '*');
      return wildcard ? { handler: wildcard.handler, params } : undefined;
    };
    return search(this.paths, 0, []);
  }
}

interface InjectedRequestOptions {
  readonly method: string;
  readonly path: string;
  readonly query: string | undefined;
  /** The route's path parameters, in order. */
  readonly params: string[];
  /** Header fields, names in lower case. */
  readonly fields: [string, string][];
}

class InjectedRequest implements ServedRequest {
  constructor(private readonly options: InjectedRequestOptions) {}

  getMethod(): string {
    return this.options.method;
  }

  getUrl(): string {
    return this.options.path;
  }

  getQuery(): string | undefined {
    return this.options.query;
  }

  getParameter(index: number): string | undefined {
    return this.options.params[index];
  }

  forEach(callback: (name: string, value: string) => void): void {
    for (const [name, value] of this.options.fields) callback(name, value);
  }
}

class InjectedResponse implements ServedResponse {
  private status = '';
  private readonly headers: Record<string, string> = {};
  private aborted?: () => void;
  dataHandler?: (chunk: ArrayBuffer, isLast: boolean) => void;
  ended = false;
  readonly answered: Promise<InjectResponse>;
  private resolve!: (response: InjectResponse) => void;

  constructor(private readonly remoteAddress: string) {
    this.answered = new Promise((resolve) => (this.resolve = resolve));
  }

  onAborted(handler: () => void): void {
    this.aborted = handler;
  }

  onData(handler: (chunk: ArrayBuffer, isLast: boolean) => void): void {
    this.dataHandler = handler;
  }

  cork(callback: () => void): void {
    callback();
  }

  writeStatus(status: string): void {
    this.status = status;
  }

  writeHeader(name: string, value: string): void {
    const key = name.toLowerCase();
    this.headers[key] = key in this.headers ? `${this.headers[key]}, ${value}` : value;
  }

  end(body: string | Buffer = '', closeConnection = false): void {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    this.headers['content-length'] ??= String(Buffer.byteLength(body));
    this.finish(text, closeConnection || this.headers.connection === 'close');
  }

  endWithoutBody(): void {
    this.finish('', this.headers.connection === 'close');
  }

  getRemoteAddressAsText(): ArrayBuffer {
    return new TextEncoder().encode(this.remoteAddress).buffer as ArrayBuffer;
  }

  /** The client went away (a test of abort handling). */
  abort(): void {
    if (!this.ended) this.aborted?.();
  }

  private finish(body: string, closed: boolean): void {
    if (this.ended) throw new Error('injected response ended twice');
    this.ended = true;
    const status = Number(this.status.split(' ')[0] || 200);
    this.resolve({ status, headers: this.headers, body, closed, json: <T>() => JSON.parse(body) as T });
  }
}

function fieldsOf(headers: InjectRequest['headers']): [string, string][] {
  if (!headers) return [];
  if (Array.isArray(headers)) return headers.map(([name, value]) => [name.toLowerCase(), value]);
  return Object.entries(headers).flatMap(([name, value]) => (Array.isArray(value) ? value : [value]).map((v): [string, string] => [name.toLowerCase(), v]));
}

/** Serves one injected request through `router`; resolves with the answer the server wrote. */
export async function inject(router: PathRouter, request: InjectRequest): Promise<InjectResponse> {
  const queryAt = request.url.indexOf('?');
  const path = queryAt < 0 ? request.url : request.url.slice(0, queryAt);
  const query = queryAt < 0 ? undefined : request.url.slice(queryAt + 1);
  const fields = fieldsOf(request.headers);
  let body: Buffer | undefined;
  if (request.body !== undefined) {
    body = typeof request.body === 'string' ? Buffer.from(request.body) : Buffer.isBuffer(request.body) ? request.body : Buffer.from(JSON.stringify(request.body));
    if (typeof request.body === 'object' && !Buffer.isBuffer(request.body) && !fields.some(([name]) => name === 'content-type')) fields.push(['content-type', 'application/json']);
    if (!fields.some(([name]) => name === 'content-length' || name === 'transfer-encoding')) fields.push(['content-length', String(body.length)]);
  }
  const match = router.match(path);
  if (!match) throw new Error(`no handler for ${path} (the server registers a catch-all)`);
  const req = new InjectedRequest({ method: request.method, path, query, params: match.params, fields });
  const res = new InjectedResponse(request.remoteAddress ?? '127.0.0.1');
  match.handler(res, req);
  // uWS delivers the body after the handler's synchronous part, in the pieces the socket received.
  if (res.dataHandler) {
    const bytes = body ?? Buffer.alloc(0);
    const pieces = Math.max(1, Math.min(request.chunks ?? 1, bytes.length || 1));
    const size = Math.ceil(bytes.length / pieces);
    for (let i = 0; i < pieces && !res.ended; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      const piece = bytes.subarray(i * size, (i + 1) * size);
      res.dataHandler(piece.buffer.slice(piece.byteOffset, piece.byteOffset + piece.byteLength) as ArrayBuffer, i === pieces - 1);
    }
  }
  return res.answered;
}
