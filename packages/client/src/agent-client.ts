// The agent side of the exchange: lists the agent's platforms once at start, then behaves like fetch,
// adding `Authorization: Bearer <token>` to requests for those platforms. Tokens are fetched on first
// use, reused until shortly before expiry, and replaced once (single-flight) when a platform answers 401.
import { inspect } from 'node:util';
import { AgentClientError } from './errors.js';
import { parseRetryAfter, retryDelayMs, sleep, type BackoffPolicy } from './backoff.js';
import { createServiceApi, type PlatformEntry, type ServiceApi } from './service-api.js';
import { PlatformMap } from './platform-map.js';
import { TokenStore } from './token-store.js';

export interface AgentClientOptions {
  /** Base URL of the credential exchange service. */
  serviceUrl: string;
  apiKeyId: string;
  /** Kept in a closure, sent only in the body of the service's two credential endpoints. */
  secret: string;
  /** fetch implementation used for the service and the platforms (defaults to the global fetch). */
  fetch?: typeof fetch;
  /**
   * Explicit URL → platform_id entries, consulted before the listing's hostnames. Keys are origins
   * ("http://127.0.0.1:3000") or hostnames ("api.shop.example").
   */
  platforms?: Record<string, string>;
  /** Scopes to request per platform_id (least privilege); default: everything granted. */
  scopes?: Record<string, string[]>;
  /** Renew a token this many seconds before it expires (at most a quarter of its lifetime). Default 30. */
  refreshSkewSeconds?: number;
  /** Retries after 429 (honouring Retry-After), 503 or network failures of the service. Default 3. */
  maxRetries?: number;
  /** A Retry-After longer than this is not waited for: the 429 is returned / thrown. Default 60. */
  maxRetryDelaySeconds?: number;
  /** Map listed hostnames for plain http: URLs too (default: https only; explicit overrides always apply). */
  allowInsecureHttp?: boolean;
  /** Timeout of each call to the service. Default 10000. */
  serviceTimeoutMs?: number;
}

export type { PlatformEntry };

/**
 * An agent's client: trades its credentials for platform tokens, keeps them fresh, and retries as the
 * service asks (Retry-After honoured, jittered).
 *
 * @example
 * const client = await AgentClient.start({ serviceUrl: 'https://ace.example.com', apiKeyId, secret });
 * const response = await client.fetch('https://shop.example.com/orders/7'); // Bearer token of that platform
 */
export class AgentClient {
  readonly #api: ServiceApi;
  readonly #tokens: TokenStore;
  readonly #fetch: typeof fetch;
  readonly #overrides: Record<string, string>;
  readonly #allowInsecureHttp: boolean;
  readonly #maxRetries: number;
  readonly #backoff: BackoffPolicy;
  readonly #serviceUrl: string;
  readonly #apiKeyId: string;
  #agentId = '';
  #listing: PlatformEntry[] = [];
  #map: PlatformMap;

  private constructor(options: AgentClientOptions) {
    const fetchImpl = options.fetch ?? globalThis.fetch;
    // Called as a plain function: some fetch implementations refuse another `this`.
    this.#fetch = (input, init) => fetchImpl(input, init);
    this.#serviceUrl = options.serviceUrl.replace(/\/+$/, '');
    this.#apiKeyId = options.apiKeyId;
    this.#overrides = { ...(options.platforms ?? {}) };
    this.#allowInsecureHttp = options.allowInsecureHttp ?? false;
    this.#maxRetries = options.maxRetries ?? 3;
    this.#backoff = { baseDelayMs: 250, maxDelayMs: (options.maxRetryDelaySeconds ?? 60) * 1000 };
    this.#api = createServiceApi({
      serviceUrl: this.#serviceUrl,
      apiKeyId: options.apiKeyId,
      secret: options.secret,
      fetch: this.#fetch,
      maxRetries: this.#maxRetries,
      backoff: this.#backoff,
      timeoutMs: options.serviceTimeoutMs ?? 10_000,
    });
    const scopes = { ...(options.scopes ?? {}) };
    this.#tokens = new TokenStore(
      (platformId) => this.#api.requestToken(platformId, scopes[platformId]),
      options.refreshSkewSeconds ?? 30,
    );
    this.#map = new PlatformMap([], this.#overrides, this.#allowInsecureHttp);
  }

  /** Creates the client and lists the agent's platforms (throws AgentClientError if the service refuses). */
  static async start(options: AgentClientOptions): Promise<AgentClient> {
    for (const name of ['serviceUrl', 'apiKeyId', 'secret'] as const) {
      if (typeof options[name] !== 'string' || options[name] === '') throw new TypeError(`AgentClient: ${name} is required`);
    }
    const client = new AgentClient(options);
    await client.reloadPlatforms();
    return client;
  }

  /** Lists the agent's platforms again and rebuilds the URL map (e.g. after a new grant). */
  async reloadPlatforms(): Promise<void> {
    const listing = await this.#api.listPlatforms();
    this.#agentId = listing.agent_id;
    this.#listing = listing.platforms;
    this.#map = new PlatformMap(listing.platforms, this.#overrides, this.#allowInsecureHttp);
  }

  get agentId(): string {
    return this.#agentId;
  }

  /** The agent's platforms as last listed (copies). */
  platforms(): PlatformEntry[] {
    return this.#listing.map((p) => ({ ...p, granted_scopes: [...p.granted_scopes] }));
  }

  /** The platform_id a URL maps to, or undefined (requests to it go out without a token). */
  platformFor(url: string | URL): string | undefined {
    return this.#map.lookup(new URL(url));
  }

  /** A valid access token for the platform (cached; fetched on first use and shortly before expiry). */
  token(platformId: string): Promise<string> {
    return this.#tokens.get(platformId);
  }

  /**
   * Like fetch. For a URL of one of the agent's platforms it adds the Bearer token; after a 401 it gets
   * a fresh token and sends the request once more, and after a 429 it waits as Retry-After says and
   * retries (both only when the body can be sent again: not for ReadableStream bodies). A request that
   * already carries an Authorization header is sent as it is.
   */
  async fetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const platformId = this.#map.lookup(url);
    if (!platformId) return this.#fetch(input, init);
    const request = new Request(input, init);
    if (request.headers.has('authorization')) return this.#fetch(request);

    const replayable = isReplayable(init);
    let token = await this.#tokens.get(platformId);
    let current = request;
    let renewed = false;
    for (let attempt = 0; ; ) {
      // Keep an unsent copy: sending consumes the body.
      const spare = replayable ? current.clone() : undefined;
      const response = await this.#fetch(withBearer(current, token));
      if (response.status === 401 && spare && !renewed && this.#tokens.mayReplace(platformId, token)) {
        renewed = true;
        await discard(response);
        token = await this.#tokens.replace(platformId, token);
        current = spare;
        continue;
      }
      if (response.status === 429 && spare && attempt < this.#maxRetries) {
        const delay = retryDelayMs(attempt++, parseRetryAfter(response.headers.get('retry-after')), this.#backoff);
        if (delay !== undefined) {
          await discard(response);
          await sleep(delay, request.signal);
          token = await this.#tokens.get(platformId);
          current = spare;
          continue;
        }
      }
      return response;
    }
  }

  toString(): string {
    return `AgentClient(${this.#apiKeyId} @ ${this.#serviceUrl}, ${this.#listing.length} platforms)`;
  }

  toJSON(): Record<string, unknown> {
    return { serviceUrl: this.#serviceUrl, apiKeyId: this.#apiKeyId, agentId: this.#agentId, platforms: this.#listing.length };
  }

  [inspect.custom](): string {
    return this.toString();
  }
}

/** Bodies that can be sent twice: none, strings, bytes, Blob, FormData, URLSearchParams (not streams). */
function isReplayable(init: RequestInit | undefined): boolean {
  const body = init?.body as unknown;
  if (body === undefined || body === null) return true;
  if (body instanceof ReadableStream) return false;
  return !(typeof body === 'object' && Symbol.asyncIterator in body);
}

function withBearer(request: Request, token: string): Request {
  const headers = new Headers(request.headers);
  headers.set('authorization', `Bearer ${token}`);
  return new Request(request, { headers });
}

async function discard(response: Response): Promise<void> {
  try {
    await response.body?.cancel();
  } catch {
    // nothing to free
  }
}

export { AgentClientError };
