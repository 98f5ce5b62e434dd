// The agent side of the exchange: lists the agent's platforms once at start, then behaves like fetch,
// adding `Authorization: Bearer <token>` to requests for those platforms. Tokens are fetched on first
// use, reused while valid (renewed in the background shortly before expiry), and replaced once
// (single-flight) when a platform answers 401. Calls to the service are retried within a time budget.
import { inspect } from 'node:util';
import { AgentClientError, RetriesExhaustedError } from './errors.js';
import { parseRetryAfter, retryDelayMs, sleep, type BackoffPolicy } from './backoff.js';
import { createServiceApi, type ClientCredential, type PlatformEntry, type ServiceApi } from './service-api.js';
import { privateKeyAssertions, readPrivateKeyFile, workloadTokenAssertions, type AssertionAlgorithm } from './client-assertion.js';
import type { JsonWebKey, KeyObject } from 'node:crypto';
import { PlatformMap } from './platform-map.js';
import { TokenStore } from './token-store.js';

/** Default wait budget of one call to the service (see AgentClientOptions.maxWaitMs). */
export const DEFAULT_MAX_WAIT_MS = 300_000;

export interface AgentClientOptions {
  /** Base URL of the credential exchange service. */
  serviceUrl: string;
  /** The agent's api_key_id (client_id). Optional with `workloadTokenFile` (the token's binding names the agent). */
  apiKeyId?: string;
  /**
   * How the agent proves who it is, exactly one of: `secret` (kept in a closure, sent only in the body of
   * the service's two credential endpoints); `privateKey` or `privateKeyFile` (private_key_jwt, RFC 7523:
   * a one-minute assertion signed for each token request at the OAuth token endpoint); `workloadTokenFile`
   * (a token the workload's platform issued, e.g. a Kubernetes projected service-account token, read again
   * at each request since the platform rotates it). Agents without secrets cannot list their platforms
   * (the listing is contract v1, secret only): name them with `platforms`.
   */
  secret?: string;
  /** private_key_jwt: a PEM string, a KeyObject or a private JWK. */
  privateKey?: KeyObject | string | JsonWebKey;
  /** private_key_jwt: a file with the private key (PEM or JWK), read once at start. */
  privateKeyFile?: string;
  /** The kid registered for the key. Default: its RFC 7638 thumbprint (what `ace agent create --key` registers for a key without kid). */
  keyId?: string;
  /** Default by key type: ES256 (EC P-256), RS256 (RSA), EdDSA (Ed25519). */
  algorithm?: AssertionAlgorithm;
  /** Workload identity: the file the platform mounts its token in (re-read at every token request). */
  workloadTokenFile?: string;
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
  /**
   * How long one call to the service (the listing, or one token) keeps retrying 429, 502, 503, 504 and
   * network failures, from its first attempt: no retry starts later than this, and a Retry-After that
   * ends later stops the call at once. Default 300000 (5 minutes): a fleet restart is refused for as long
   * as the service needs to verify every agent once, and its Retry-After alone goes up to 60 s.
   */
  maxWaitMs?: number;
  /**
   * Deprecated as the main bound (use maxWaitMs). If given, also at most this many retries per call to
   * the service. Also bounds the retries of a platform's 429 (default 3 for those).
   */
  maxRetries?: number;
  /** A Retry-After longer than this is not waited for: the 429 is returned / thrown. Default 60. */
  maxRetryDelaySeconds?: number;
  /**
   * Told when a renewal that ran in the background (the token in use still valid) failed, e.g. to log
   * it. Requests keep the valid token; after it expires they wait on a new renewal and get its error.
   */
  onRenewalError?: (platformId: string, error: AgentClientError) => void;
  /** Map listed hostnames for plain http: URLs too (default: https only; explicit overrides always apply). */
  allowInsecureHttp?: boolean;
  /** Timeout of each call to the service. Default 10000. */
  serviceTimeoutMs?: number;
}

export type { PlatformEntry };

/**
 * An agent's client: trades its credentials for platform tokens, keeps them fresh (renewing in the
 * background while the token in use is valid), and rides out a restart of the service: 429, 502, 503, 504
 * and network failures are retried (Retry-After honoured, jittered) for up to `maxWaitMs`.
 *
 * @example
 * const client = await AgentClient.start({ serviceUrl: 'https://ace.example.com', apiKeyId, secret });
 * const response = await client.fetch('https://shop.example.com/orders/7'); // Bearer token of that platform
 */
export class AgentClient {
  readonly #api: ServiceApi;
  readonly #tokens: TokenStore;
  /** Scopes asked per platform (least privilege); a step-up adds what a platform's 403 named. */
  readonly #scopes: Record<string, string[]> = {};
  readonly #fetch: typeof fetch;
  readonly #overrides: Record<string, string>;
  readonly #allowInsecureHttp: boolean;
  /** Retries of a platform's 429. */
  readonly #platformRetries: number;
  readonly #backoff: BackoffPolicy;
  readonly #serviceUrl: string;
  readonly #apiKeyId: string;
  /** Agents without secrets have no listing (contract v1): their platforms come from `platforms`. */
  readonly #lists: boolean;
  #agentId = '';
  #listing: PlatformEntry[] = [];
  #map: PlatformMap;

  private constructor(options: AgentClientOptions) {
    const fetchImpl = options.fetch ?? globalThis.fetch;
    // Called as a plain function: some fetch implementations refuse another `this`.
    this.#fetch = (input, init) => fetchImpl(input, init);
    this.#serviceUrl = options.serviceUrl.replace(/\/+$/, '');
    this.#apiKeyId = options.apiKeyId ?? '';
    const credential = credentialOf(options);
    this.#lists = 'secret' in credential;
    this.#overrides = { ...(options.platforms ?? {}) };
    this.#allowInsecureHttp = options.allowInsecureHttp ?? false;
    this.#platformRetries = options.maxRetries ?? 3;
    // Without Retry-After (a refused connection, an ingress's 502) the backoff tops out at 10 s, so agents
    // are back within seconds of the service; with it, the service decides (up to maxRetryDelaySeconds).
    this.#backoff = { baseDelayMs: 250, maxDelayMs: (options.maxRetryDelaySeconds ?? 60) * 1000, maxBackoffMs: 10_000 };
    this.#api = createServiceApi({
      serviceUrl: this.#serviceUrl,
      apiKeyId: this.#apiKeyId,
      credential,
      fetch: this.#fetch,
      retry: { ...this.#backoff, maxWaitMs: options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS, maxRetries: options.maxRetries },
      timeoutMs: options.serviceTimeoutMs ?? 10_000,
    });
    const scopes = this.#scopes;
    Object.assign(scopes, options.scopes ?? {});
    const onRenewalError = options.onRenewalError;
    this.#tokens = new TokenStore(
      (platformId) => this.#api.requestToken(platformId, scopes[platformId]),
      options.refreshSkewSeconds ?? 30,
      onRenewalError && ((platformId, error) => onRenewalError(platformId, asClientError(error))),
    );
    this.#map = new PlatformMap([], this.#overrides, this.#allowInsecureHttp);
  }

  /** Creates the client and lists the agent's platforms (throws AgentClientError if the service refuses). */
  static async start(options: AgentClientOptions): Promise<AgentClient> {
    if (typeof options.serviceUrl !== 'string' || options.serviceUrl === '') throw new TypeError('AgentClient: serviceUrl is required');
    const given = (['secret', 'privateKey', 'privateKeyFile', 'workloadTokenFile'] as const).filter((name) => options[name] !== undefined);
    if (given.length !== 1) throw new TypeError('AgentClient: give exactly one of secret, privateKey, privateKeyFile and workloadTokenFile');
    if (options.workloadTokenFile === undefined && (typeof options.apiKeyId !== 'string' || options.apiKeyId === '')) throw new TypeError('AgentClient: apiKeyId is required');
    if (options.secret !== undefined && (typeof options.secret !== 'string' || options.secret === '')) throw new TypeError('AgentClient: secret must be a non-empty string');
    for (const name of ['maxWaitMs', 'maxRetries', 'maxRetryDelaySeconds', 'refreshSkewSeconds', 'serviceTimeoutMs'] as const) {
      const value = options[name];
      if (value !== undefined && !(typeof value === 'number' && Number.isFinite(value) && value >= 0)) {
        throw new TypeError(`AgentClient: ${name} must be a finite number >= 0`);
      }
    }
    const client = new AgentClient(options);
    await client.reloadPlatforms();
    return client;
  }

  /** Lists the agent's platforms again and rebuilds the URL map (e.g. after a new grant). */
  async reloadPlatforms(): Promise<void> {
    if (!this.#lists) {
      this.#map = new PlatformMap([], this.#overrides, this.#allowInsecureHttp);
      return;
    }
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
   * Like fetch. For a URL of one of the agent's platforms it adds the Bearer token; after a 401, or a 403
   * whose challenge says insufficient_scope (a grant widened since the token was issued), it gets a fresh
   * token and sends the request once more, and after a 429 it waits as Retry-After says and
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
      // Scope step-up (RFC 6750 §3.1, MCP authorization): a 403 insufficient_scope may mean the grant was
      // widened after this token was issued. One new token, as after a 401 (at most one per token every few
      // seconds); when the service refuses it, the platform's answer stands.
      const challenged = response.status === 403 && spare && !renewed ? insufficientScope(response) : undefined;
      if (challenged && spare && this.#tokens.mayReplace(platformId, token)) {
        renewed = true;
        const widened = this.#stepUp(platformId, challenged);
        let fresh: string | undefined;
        try {
          fresh = await this.#tokens.replace(platformId, token);
        } catch {
          widened?.undo();
        }
        if (fresh === undefined) return response;
        await discard(response);
        token = fresh;
        current = spare;
        continue;
      }
      if (response.status === 429 && spare && attempt < this.#platformRetries) {
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

  /**
   * An agent that asks for a subset of its grant adds the scopes the platform named; one asking for its
   * whole grant (the default) asks again as it is. `undo` when the service refused the wider request.
   */
  #stepUp(platformId: string, challenged: string[]): { undo(): void } | undefined {
    const asked = this.#scopes[platformId];
    if (!asked?.length) return undefined;
    const missing = challenged.filter((scope) => !asked.includes(scope));
    if (missing.length === 0) return undefined;
    this.#scopes[platformId] = [...asked, ...missing];
    return { undo: () => void (this.#scopes[platformId] = asked) };
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

function credentialOf(options: AgentClientOptions): ClientCredential {
  if (options.secret !== undefined) return { secret: options.secret };
  if (options.workloadTokenFile !== undefined) return { assertions: workloadTokenAssertions(options.workloadTokenFile) };
  const privateKey = options.privateKey ?? readPrivateKeyFile(options.privateKeyFile!);
  return { assertions: privateKeyAssertions({ apiKeyId: options.apiKeyId!, privateKey, keyId: options.keyId, algorithm: options.algorithm }) };
}

/** Bodies that can be sent twice: none, strings, bytes, Blob, FormData, URLSearchParams (not streams). */
function isReplayable(init: RequestInit | undefined): boolean {
  const body = init?.body as unknown;
  if (body === undefined || body === null) return true;
  if (body instanceof ReadableStream) return false;
  return !(typeof body === 'object' && Symbol.asyncIterator in body);
}

/**
 * The scopes of a `WWW-Authenticate` challenge with error="insufficient_scope" (any scheme: Bearer, DPoP),
 * [] when it names none; undefined for any other answer.
 */
export function insufficientScope(response: Response): string[] | undefined {
  const header = response.headers.get('www-authenticate');
  if (!header || !/(?:^|[\s,])error\s*=\s*"?insufficient_scope"?(?:[\s,]|$)/i.test(header)) return undefined;
  const scope = /(?:^|[\s,])scope\s*=\s*"([^"]*)"/i.exec(header)?.[1] ?? /(?:^|[\s,])scope\s*=\s*([^\s,"]+)/i.exec(header)?.[1] ?? '';
  // Scope tokens are printable ASCII without spaces, quotes or backslashes (RFC 6749 §3.3); anything else is ignored.
  return scope.split(' ').filter((token) => /^[\x21\x23-\x5b\x5d-\x7e]{1,256}$/.test(token)).slice(0, 64);
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
    // Cancelling a body that already ended or failed: there is nothing left to free.
  }
}

/** Everything the service calls throw is an AgentClientError; anything else is wrapped, never dropped. */
function asClientError(error: unknown): AgentClientError {
  if (error instanceof AgentClientError) return error;
  return new AgentClientError(`token renewal failed (${(error as Error)?.name ?? 'unknown error'})`, undefined, undefined, undefined, { cause: error });
}

export { AgentClientError, RetriesExhaustedError };
