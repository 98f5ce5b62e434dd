// The framework-free core: given a request's method, path and Authorization header, decide.
// Token checks are local (RS256 signature against the cached JWKS on keys imported once, iss, aud = this
// platform, exp/nbf; a token already verified is answered from a bounded cache, re-checked for what may change);
// the route's required scopes come from the scope file read at start-up. Which rule applies is asked the
// way the adapter can answer best: the framework's own routing result, every candidate, or the canonical
// path (scope-map.ts); whatever maps to no rule, or to no single rule, is refused.
// Runtime-neutral: no `node:` module, no file, no `ws`, no code generated at run time; it needs only the
// `fetch`, `WebSocket` (optional: else the feed is polled), `crypto.subtle` and timer globals.
import type { JWTPayload } from 'jose';
import { JwksCache } from './jwks-cache.js';
import { badPath, insufficientScope, uriTooLong, type Refusal } from './challenge.js';
import { DEFAULT_MAX_PATH_LENGTH, DEFAULT_MAX_SEGMENT_LENGTH, pathTooLong, type PathLimits } from './canonical-path.js';
import { loadScopeFile, RouteTable, type RouteMatch, type RouteResolution, type ScopeTextSource } from './scope-map.js';
import { RevocationReceiver, type FeedSocketConstructor, type RevocationFeedOptions, type RevocationFeedStats } from './revocation-feed.js';
import { webRs256, type Rs256 } from './rs256.js';
import { VerifiedTokens, webTokenDigest, type TokenDigest, type VerifiedToken } from './verified-tokens.js';
import { protectedResource } from './protected-resource.js';
import { routeResolver, type RouteTarget } from './route-resolver.js';
import { createTokenVerifier } from './token-verifier.js';

// Split along its seams: the token (token-verifier.ts), the route (route-resolver.ts and routeAuthorizer
// below), the protected resource (protected-resource.ts), the revocation feed (revocation-feed.ts).
export { MAX_TOKEN_LENGTH } from './token-verifier.js';
export { PROTECTED_RESOURCE_PATH, ResourceNotRegisteredError } from './protected-resource.js';
export type { RouteTarget } from './route-resolver.js';

export interface VerifierBaseOptions {
  /** Base URL of the credential exchange service, e.g. https://ace.example.com. */
  serviceUrl: string;
  /** Defaults to `${serviceUrl}/.well-known/jwks.json`. */
  jwksUrl?: string;
  /** Expected `iss` claim. Defaults to serviceUrl without a trailing slash (the service's default ISSUER). */
  issuer?: string;
  /** This platform's id. Defaults to the scope file's platform_id; must equal it when given. */
  platformId?: string;
  /**
   * This server's resource identifier (RFC 8707 / RFC 9728): the URI agents name as `resource` when they
   * ask the service's /oauth2/token, e.g. an MCP server's `https://api.example.com/mcp` or the platform's
   * `https://shop.example.com` (https; http only on a loopback host). It must be one the service knows for
   * this platform (registered with `ace platform update --resource`, or https://<verified domain>):
   * `ready()` checks it against the service's scope file and rejects when it is not. When set, the
   * verifier answers `GET /.well-known/oauth-protected-resource[/<path>]` itself (RFC 9728 metadata,
   * status 200, before any token check) and its 401 challenges carry `resource_metadata="<that URL>"`.
   */
  resource?: string;
  /** Realm in WWW-Authenticate challenges; defaults to the platform id. */
  realm?: string;
  /**
   * What to do with a request whose method + path has no rule in the scope file:
   * - "deny" (default): refuse with 403, so a route added to the code but not to the scope file is closed.
   * - "authenticate": any valid token of this platform may pass, no scope needed.
   */
  unmatchedRoutes?: 'deny' | 'authenticate';
  /**
   * Longest request path (query excluded) the verifier reads, in characters. A longer one is answered 414
   * before the token or the path is looked at, so no request can make the path check costly.
   * Default 4096 (DEFAULT_MAX_PATH_LENGTH).
   */
  maxPathLength?: number;
  /** Longest path segment (between two "/"), in characters; a longer one is answered 414. Default 1024 (DEFAULT_MAX_SEGMENT_LENGTH). */
  maxSegmentLength?: number;
  /**
   * Tokens kept once verified (by a SHA-256 of the token, until their `exp`): a token presented again skips
   * the signature check. Every hit still checks the clock, the revocation feed and that the JWKS publishes
   * the token's key. Bounded: past this many, the oldest entry goes. 0 turns it off.
   * Default 10000 (DEFAULT_VERIFIED_TOKEN_CACHE_SIZE).
   */
  verifiedTokenCacheSize?: number;
  /** Leeway for exp/nbf against clock drift between the service and this platform. Default 5. */
  clockToleranceSeconds?: number;
  /** Minimum seconds between two JWKS fetches (forged-kid floods cannot go beyond this). Default 5. */
  jwksCooldownSeconds?: number;
  /** Upper bound of the JWKS cache lifetime whatever Cache-Control says. Default 3600. */
  jwksMaxAgeSeconds?: number;
  /** Timeout of a JWKS fetch. Default 5000. */
  jwksTimeoutMs?: number;
  /** fetch implementation for the JWKS and the revocation feed (defaults to the global fetch). */
  fetch?: typeof fetch;
  /**
   * The clock the token and revocation checks read (exp, nbf, iat, the revocation entries' lifetimes and the
   * feed's freshness), in milliseconds since the epoch. Default `Date.now`. For tests with a fixed time
   * (the conformance vectors in `conformance/`); timers and the JWKS cache's lifetime keep the real clock.
   */
  now?: () => number;
  /**
   * The service's revocation feed for this platform (tokens taken back before they expire), and its options
   * (below). Default: on; `false` turns it off (tokens then stay valid until they expire, whatever the
   * operator does).
   */
  revocationFeed?: RevocationFeedOptions | false;
  /**
   * The platform's revocation feed token (`acef_...`): required while the feed is on. Same as
   * `revocationFeed.feedToken` (either may be given).
   */
  feedToken?: string | undefined;
  /**
   * `serviceUrl` and `jwksUrl` must be `https://` unless their host is loopback (127.0.0.0/8, ::1,
   * localhost): anyone on a plain-HTTP path can rewrite the JWKS and mint tokens this platform accepts.
   * `true` allows `http://` anyway (a private network you trust, a test rig), with a loud warning at start.
   */
  allowInsecureServiceUrl?: boolean;
}

/** The runtime-neutral verifier's options: the scope file as text or parsed document. */
export type CoreVerifierOptions = VerifierBaseOptions & ScopeTextSource;

/** What a runtime's entry point adds (the Node one: the `ws` package where there is no global WebSocket). */
export interface RuntimeHooks {
  fallbackWebSocket?: () => Promise<FeedSocketConstructor | undefined>;
  /** SHA-256 of a token for the verified-token cache; WebCrypto's (asynchronous) when absent. */
  tokenDigest?: TokenDigest;
  /** RS256 keys and signature checks; WebCrypto's when absent. */
  rs256?: Rs256;
}

/** What a handler learns about the calling agent. */
export interface AgentClaims {
  /** `sub`: the agent's id. */
  agentId: string;
  /** `client_id`: the agent's public api_key_id. */
  clientId: string | undefined;
  /** This platform's id (in `aud`). */
  platformId: string;
  /** The resource identifier the token was issued for (in `aud` beside the platform id), if any. */
  resource: string | undefined;
  /** Scopes the token carries. */
  scopes: string[];
  /** `jti`. */
  tokenId: string | undefined;
  /** `exp`, seconds since the epoch. */
  expiresAt: number;
  /** The scope-file rule that matched, if any. */
  route: RouteMatch | undefined;
  /** The access token as presented (for code that passes it on, e.g. the MCP SDK's AuthInfo). */
  token: string;
  /** The whole verified payload. */
  payload: JWTPayload;
}


export interface AuthorizeInput {
  method: string;
  /**
   * Request target as received (path, optionally with a query string): checked against the path length
   * limits whatever the target kind, and the route target itself when `target` is absent. Adapters that give
   * a `template` target pass it too: the RFC 9728 metadata is answered by path, whatever route (if any) the
   * framework matched.
   */
  path?: string;
  target?: RouteTarget;
  authorization: string | string[] | undefined;
}

export type AuthorizeResult =
  | { ok: true; claims: AgentClaims; /** The canonical request target, when the rule was found by `path`. */ canonicalTarget?: string }
  | Refusal;

export interface Verifier {
  readonly platformId: string;
  readonly realm: string;
  authorize(input: AuthorizeInput): Promise<AuthorizeResult>;
  /** The rule for a request, or undefined (as the verifier sees it). */
  routeFor(method: string, path: string): RouteMatch | undefined;
  /**
   * Fetches the JWKS and synchronises the revocation feed, then keeps the feed connected (call at
   * start-up; rejects when the service is unreachable). Without it, the first request does the same.
   */
  ready(): Promise<void>;
  /**
   * The resource identifiers this verifier accepts in `aud` beside the platform id (its `resource` option
   * and the scope file's `resources`), in normal form.
   */
  readonly resources: readonly string[];
  /** Closes the feed's socket and stops every timer. */
  close(): void;
  /** RFC 9728 protected-resource metadata (undefined when the `resource` option is not set). */
  protectedResourceMetadata(): Record<string, unknown> | undefined;
  /** The revocation feed's state and counters (undefined when the feed is off). */
  revocationStats(): RevocationFeedStats | undefined;
}




export const DEFAULT_VERIFIED_TOKEN_CACHE_SIZE = 10_000;



/**
 * Reads the scope file (throws ScopeFileError if invalid) and returns the verifier.
 *
 * @example
 * const verifier = createVerifier({ serviceUrl: 'https://ace.example.com', platformId, scopesFile: './scopes.yaml' });
 * await verifier.ready(); // keys and revocation feed now; fail fast if the service is unreachable
 * http.createServer(protectNodeHandler(verifier, (req, res) => res.end(req.agent.agentId))).listen(3000);
 */
export function createVerifier(options: CoreVerifierOptions, hooks: RuntimeHooks = {}): Verifier {
  const scopeFile = loadScopeFile(options);
  if (options.platformId !== undefined && options.platformId !== scopeFile.platform_id) {
    throw new Error(`platformId ${options.platformId} differs from the scope file's platform_id ${scopeFile.platform_id}`);
  }
  const platformId = scopeFile.platform_id;
  const serviceUrl = options.serviceUrl.replace(/\/+$/, '');
  requireSecureUrl('serviceUrl', serviceUrl, options);
  if (options.jwksUrl !== undefined) requireSecureUrl('jwksUrl', options.jwksUrl, options);
  const issuer = options.issuer ?? serviceUrl;
  const realm = options.realm ?? platformId;
  const unmatched = options.unmatchedRoutes ?? 'deny';
  const clockTolerance = options.clockToleranceSeconds ?? 5;
  const now = options.now ?? Date.now;
  const cooldownMs = (options.jwksCooldownSeconds ?? 5) * 1000;
  const routes = new RouteTable(scopeFile.routes);
  const verified = new VerifiedTokens(options.verifiedTokenCacheSize === 0 ? 0 : positiveInteger('verifiedTokenCacheSize', options.verifiedTokenCacheSize ?? DEFAULT_VERIFIED_TOKEN_CACHE_SIZE));
  const tokenDigest = hooks.tokenDigest ?? webTokenDigest;
  const rs256 = hooks.rs256 ?? webRs256;
  const pathLimits: PathLimits = {
    maxPathLength: positiveInteger('maxPathLength', options.maxPathLength ?? DEFAULT_MAX_PATH_LENGTH),
    maxSegmentLength: positiveInteger('maxSegmentLength', options.maxSegmentLength ?? DEFAULT_MAX_SEGMENT_LENGTH),
  };
  const jwksTimeoutMs = options.jwksTimeoutMs ?? 5000;
  const jwks = new JwksCache({
    url: options.jwksUrl ?? `${serviceUrl}/.well-known/jwks.json`,
    fetch: (input, init) => (options.fetch ?? globalThis.fetch)(input, init),
    cooldownMs,
    defaultMaxAgeMs: 300_000,
    maxMaxAgeMs: (options.jwksMaxAgeSeconds ?? 3600) * 1000,
    timeoutMs: jwksTimeoutMs,
    rs256,
  });

  const feed = revocationReceiver(options, hooks, { serviceUrl, platformId, issuer, jwks, clockTolerance, now });
  const resource = protectedResource({ resource: options.resource, issuer, platformId, scopeFile });
  const checkToken = createTokenVerifier({
    realm,
    issuer,
    platformId,
    audiences: resource.audiences,
    resources: resource.resources,
    clockTolerance,
    now,
    cooldownMs,
    jwks,
    feed,
    verified,
    tokenDigest,
    rs256,
  });
  const authorizeRoute = routeAuthorizer({ realm, platformId, unmatched, resolve: routeResolver(routes) });

  async function authorize(input: AuthorizeInput): Promise<AuthorizeResult> {
    // Before anything else reads the target (the token check included): its cost is bounded from here on.
    const received = input.path ?? (input.target && input.target.kind !== 'template' ? input.target.path : undefined);
    const tooLong = received === undefined ? undefined : pathTooLong(received, pathLimits);
    if (tooLong !== undefined) return uriTooLong(tooLong);
    const metadataAnswer = resource.answerFor(input.method, received);
    if (metadataAnswer) return metadataAnswer;
    const checked = await checkToken(input.authorization);
    const result = checked.ok ? authorizeRoute(checked.token, checked.raw, input.method, input.path, input.target) : checked;
    return !result.ok && result.status === 401 ? resource.challenge(result) : result;
  }

  return {
    platformId,
    realm,
    authorize,
    routeFor: (method, path) => routes.match(method, path),
    ready: async () => {
      await jwks.prefetch();
      await resource.checkRegistered({ serviceUrl, fetch: options.fetch ?? globalThis.fetch, timeoutMs: jwksTimeoutMs });
      await feed?.sync();
    },
    resources: resource.resources,
    close: () => {
      jwks.close();
      feed?.close();
    },
    revocationStats: () => feed?.stats(),
    protectedResourceMetadata: () => resource.metadata(),
  };
}

/** The revocation feed's receiver (undefined when the feed is off); a TypeError without a feed token. */
function revocationReceiver(
  options: CoreVerifierOptions,
  hooks: RuntimeHooks,
  shared: { serviceUrl: string; platformId: string; issuer: string; jwks: JwksCache; clockTolerance: number; now: () => number },
): RevocationReceiver | undefined {
  if (options.revocationFeed === false) return undefined;
  const feedToken = options.revocationFeed?.feedToken ?? options.feedToken;
  if (!feedToken) {
    throw new TypeError(
      'createVerifier: the revocation feed needs a feed token: set `feedToken` (a feed credential of this platform: ' +
        'POST /admin/v1/platforms/{platform_id}/feed-credentials, or `ace platform feed-token <platform_id>`), or turn the feed off with `revocationFeed: false`',
    );
  }
  const { serviceUrl, platformId, issuer, jwks, clockTolerance, now } = shared;
  return new RevocationReceiver(
    {
      serviceUrl,
      platformId,
      issuer,
      feedToken,
      jwks,
      fetch: (input, init) => (options.fetch ?? globalThis.fetch)(input, init),
      clockToleranceSeconds: clockTolerance,
      now,
      ...(hooks.fallbackWebSocket ? { fallbackWebSocket: hooks.fallbackWebSocket } : {}),
    },
    options.revocationFeed,
  );
}

/**
 * The route half of the verifier: a verified token against the scope-file rule the request reaches (found as
 * the adapter asks, route-resolver.ts), with the claims a handler gets.
 */
function routeAuthorizer({
  realm,
  platformId,
  unmatched,
  resolve,
}: {
  realm: string;
  platformId: string;
  unmatched: 'deny' | 'authenticate';
  resolve: (method: string, target: RouteTarget) => RouteResolution;
}) {
  return function authorizeRoute(token: VerifiedToken, raw: string, method: string, path: string | undefined, target: RouteTarget | undefined): AuthorizeResult {
    const { payload } = token;
    const scopes = [...token.scopes];
    // Authenticated first, so a caller without a valid token learns nothing about routing.
    const resolution = resolve(method, target ?? { kind: 'path', path: path ?? '' });
    if (resolution.kind === 'bad-path') return badPath(resolution.reason);
    if (resolution.kind === 'ambiguous') return insufficientScope(realm, resolution.reason, undefined);
    const route = resolution.kind === 'rule' ? resolution.rule : undefined;
    const claims: AgentClaims = {
      agentId: payload.sub as string,
      clientId: typeof payload.client_id === 'string' ? payload.client_id : undefined,
      platformId,
      resource: token.resource,
      scopes,
      tokenId: payload.jti,
      expiresAt: token.exp,
      route,
      token: raw,
      payload: payload as JWTPayload,
    };
    const canonicalTarget = resolution.kind === 'rule' || resolution.kind === 'none' ? resolution.canonical : undefined;
    if (!route) {
      if (unmatched === 'authenticate') return canonicalTarget === undefined ? { ok: true, claims } : { ok: true, claims, canonicalTarget };
      return insufficientScope(realm, 'No scope rule allows this route.', undefined);
    }
    const missing = route.scopes.filter((s) => !scopes.includes(s));
    if (missing.length > 0) return insufficientScope(realm, `This route needs the scope ${route.scopes.join(' ')}.`, route.scopes);
    return canonicalTarget === undefined ? { ok: true, claims } : { ok: true, claims, canonicalTarget };
  };
}

/**
 * Refuses a service URL that anyone on the network path could read or rewrite (plain HTTP to a host that
 * is not loopback), unless `allowInsecureServiceUrl` says otherwise: then it warns, loudly, once.
 */
function requireSecureUrl(name: string, url: string, options: VerifierBaseOptions): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`createVerifier: ${name} is not a URL: ${JSON.stringify(url)}`);
  }
  if (parsed.protocol === 'https:') return;
  if (parsed.protocol !== 'http:') throw new TypeError(`createVerifier: ${name} must be an https:// URL (got ${parsed.protocol})`);
  if (isLoopbackHost(parsed.hostname)) return;
  const risk = `${name} ${parsed.origin} is plain http:// to a host that is not loopback: anyone on that path can rewrite the JWKS and the revocation feed, and mint tokens this platform accepts`;
  if (options.allowInsecureServiceUrl !== true) {
    throw new TypeError(`createVerifier: ${risk}. Use https://, or set allowInsecureServiceUrl: true if that network is yours alone`);
  }
  const warn = (options.revocationFeed && options.revocationFeed.warn) || ((message: string) => console.warn(`[agent-credential-exchange] ${message}`));
  warn(`INSECURE: ${risk} (allowInsecureServiceUrl: true)`);
}

/** 127.0.0.0/8, ::1 and localhost, as the URL parser writes them (it normalises 127.1, 0x7f.1, [0:0::1], ...). */
function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase();
  return host === 'localhost' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
function positiveInteger(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new TypeError(`createVerifier: ${name} must be a positive integer, got ${String(value)}`);
  return value;
}
