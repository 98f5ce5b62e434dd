// The framework-free core: given a request's method, path and Authorization header, decide.
// Token checks are local (RS256 signature against the cached JWKS on keys imported once, iss, aud = this
// platform, exp/nbf; a token already verified is answered from a bounded cache, re-checked for what may change);
// the route's required scopes come from the scope file read at start-up. Which rule applies is asked the
// way the adapter can answer best: the framework's own routing result, every candidate, or the canonical
// path (scope-map.ts); whatever maps to no rule, or to no single rule, is refused.
// Runtime-neutral: no `node:` module, no file, no `ws`, no code generated at run time; it needs only the
// `fetch`, `WebSocket` (optional: else the feed is polled), `crypto.subtle` and timer globals.
import type { JWTPayload } from 'jose';
import { JwksCache, JwksUnavailableError, UnknownKeyError } from './jwks-cache.js';
import { badPath, insufficientScope, invalidRequest, invalidToken, missingToken, resourceMetadataAnswer, unavailable, uriTooLong, withResourceMetadata, type Refusal } from './challenge.js';
import { DEFAULT_MAX_PATH_LENGTH, DEFAULT_MAX_SEGMENT_LENGTH, pathTooLong, type PathLimits } from './canonical-path.js';
import { normaliseResource } from '@agent-credential-exchange/protocol/resource-identifier';
import { loadScopeFile, RouteTable, type RouteMatch, type RouteResolution, type ScopeTextSource, type TemplateSyntax } from './scope-map.js';
import { RevocationReceiver, type FeedSocketConstructor, type RevocationFeedOptions, type RevocationFeedStats } from './revocation-feed.js';
import { webRs256, type Rs256 } from './rs256.js';
import { checkClaims, takeApart, type TokenDefect } from './token-check.js';
import { VerifiedTokens, webTokenDigest, type TokenDigest, type VerifiedToken } from './verified-tokens.js';

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

/**
 * How the verifier finds the scope-file rule of a request:
 * - `template`: the route template the framework matched (Fastify's routeOptions.url, Express's req.route.path);
 *   looked up by method and shape, never re-matched. No template (a 404) or one the scope file lacks: no rule.
 * - `candidates`: the request target, before any router ran; every rule it could reach is required.
 * - `path`: the request target, canonicalised (canonical-path.ts) and matched exactly.
 */
export type RouteTarget =
  | { kind: 'template'; template: string | readonly string[] | undefined; syntax: TemplateSyntax }
  | { kind: 'candidates'; path: string }
  | { kind: 'path'; path: string };

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

const TOKEN_PATTERN = /^[A-Za-z0-9\-._~+/]+=*$/; // RFC 6750 b64token

/**
 * Longest token accepted, in characters (= bytes: b64token is ASCII). The service's tokens are under
 * 1 KiB; a larger one is refused before it is decoded, so a validly signed 200 KB token costs nothing.
 */
export const MAX_TOKEN_LENGTH = 8192;

/**
 * The `typ` header each token profile (`svc_token_profile` claim) must carry, lower case, without the
 * optional "application/" prefix (RFC 7515 section 4.1.9). A token of one profile cannot pass as another.
 */
const PROFILE_TYP: Record<string, string> = {
  'svc-native-jwt': 'jwt',
  'oauth-at-jwt': 'at+jwt', // RFC 9068 section 2.1
};

export const DEFAULT_VERIFIED_TOKEN_CACHE_SIZE = 10_000;

/** Request targets whose rule is remembered (resolve), and the longest one remembered. */
const MAX_MEMO_PATHS = 1024;
const MAX_MEMO_PATH_LENGTH = 512;

/** The longest lifetime the service can give a token (TOKEN_TTL_SECONDS max): bounds `iat`'s age. */
const MAX_TOKEN_AGE_SECONDS = 86_400;

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

  const feedToken = options.revocationFeed === false ? undefined : (options.revocationFeed?.feedToken ?? options.feedToken);
  if (options.revocationFeed !== false && !feedToken) {
    throw new TypeError(
      'createVerifier: the revocation feed needs a feed token: set `feedToken` (a feed credential of this platform: ' +
        'POST /admin/v1/platforms/{platform_id}/feed-credentials, or `ace platform feed-token <platform_id>`), or turn the feed off with `revocationFeed: false`',
    );
  }
  const feed =
    options.revocationFeed === false
      ? undefined
      : new RevocationReceiver(
          {
            serviceUrl,
            platformId,
            issuer,
            feedToken: feedToken!,
            jwks,
            fetch: (input, init) => (options.fetch ?? globalThis.fetch)(input, init),
            clockToleranceSeconds: clockTolerance,
            now,
            ...(hooks.fallbackWebSocket ? { fallbackWebSocket: hooks.fallbackWebSocket } : {}),
          },
          options.revocationFeed,
        );
  const ready = async () => {
    await jwks.prefetch();
    if (resource !== undefined) await checkResourceRegistered({ serviceUrl, platformId, resource, fetch: options.fetch ?? globalThis.fetch, timeoutMs: jwksTimeoutMs });
    await feed?.sync();
  };

  // The rule of a request target, by method and path, as last resolved: a pure function of the scope file,
  // so a path asked again (the same URL of a busy route) is not canonicalised and matched again. Bounded.
  const resolved = new Map<string, RouteResolution>();
  function resolve(method: string, target: RouteTarget): RouteResolution {
    if (target.kind === 'template') return routes.resolveTemplate(method, target.template, target.syntax);
    const memo = target.path.length <= MAX_MEMO_PATH_LENGTH ? `${target.kind} ${method} ${target.path}` : undefined;
    const seen = memo === undefined ? undefined : resolved.get(memo);
    if (seen) return seen;
    const resolution = target.kind === 'candidates' ? routes.resolveCandidates(method, target.path) : routes.resolvePath(method, target.path);
    if (memo !== undefined) {
      if (resolved.size >= MAX_MEMO_PATHS) resolved.delete(resolved.keys().next().value!);
      resolved.set(memo, resolution);
    }
    return resolution;
  }

  // RFC 9728: the metadata lives at /.well-known/oauth-protected-resource inserted before the resource's path.
  const resource = options.resource === undefined ? undefined : resourceOption(options.resource);
  const resourceUrl = resource === undefined ? undefined : new URL(resource);
  const metadataPath = resourceUrl && `${PROTECTED_RESOURCE_PATH}${resourceUrl.pathname === '/' ? '' : resourceUrl.pathname}`;
  const metadataUrl = resourceUrl && `${resourceUrl.origin}${metadataPath}`;
  // No jwks_uri: in RFC 9728 it names the resource's own signing keys, and this resource has none (the
  // tokens' keys are the authorization server's, found through its RFC 8414 metadata).
  const metadata = resource && {
    resource,
    authorization_servers: [issuer],
    scopes_supported: scopeFile.scopes.map((scope) => scope.name),
    bearer_methods_supported: ['header'],
  };
  const metadataAnswer = metadata && resourceMetadataAnswer(metadata);
  // What `aud` may name beside the platform id: this server and the platform's other servers.
  const resources = [...new Set([...(resource === undefined ? [] : [resource]), ...knownResources(scopeFile.resources ?? []), `urn:uuid:${platformId}`])];
  const audiences = [platformId, ...resources];

  async function authorize(input: AuthorizeInput): Promise<AuthorizeResult> {
    // Before anything else reads the target (the token check included): its cost is bounded from here on.
    const received = input.path ?? (input.target && input.target.kind !== 'template' ? input.target.path : undefined);
    const tooLong = received === undefined ? undefined : pathTooLong(received, pathLimits);
    if (tooLong !== undefined) return uriTooLong(tooLong);
    if (metadataAnswer && (input.method === 'GET' || input.method === 'HEAD')) {
      const { target } = input;
      const requested = input.path ?? (target === undefined || target.kind === 'template' ? undefined : target.path);
      if (requested !== undefined && requested.split('?', 1)[0] === metadataPath) return metadataAnswer;
    }
    const result = await check(input);
    // RFC 9728 §5.1: a 401 names where the resource's metadata is.
    if (metadataUrl && !result.ok && result.status === 401) return withResourceMetadata(result, metadataUrl);
    return result;
  }

  async function check({ method, path, target, authorization }: AuthorizeInput): Promise<AuthorizeResult | Refusal> {
    if (authorization === undefined || authorization === '') return missingToken(realm);
    if (Array.isArray(authorization)) return invalidRequest(realm, 'More than one Authorization header.');
    // Size first: nothing of an oversized header is split, matched or decoded ("Bearer " + token + slack).
    if (authorization.length > MAX_TOKEN_LENGTH + 64) return invalidToken(realm, TOO_LARGE);
    // The usual header of a token seen before: the same bytes (same SHA-256) passed the syntax checks below
    // when it was verified, so they are not split and matched again.
    const usual = authorization.startsWith('Bearer ') ? authorization.slice(7) : undefined;
    let usualKey: string | undefined;
    let known: VerifiedToken | undefined;
    if (usual !== undefined) {
      const digest = tokenDigest(usual);
      usualKey = typeof digest === 'string' ? digest : await digest;
      known = verified.get(usualKey);
    }
    let token: string;
    let cacheKey: string;
    if (known) {
      token = usual!;
      cacheKey = usualKey!;
    } else {
      const [scheme, ...rest] = authorization.trim().split(/\s+/);
      // Another scheme (Basic, ...) means no Bearer token was offered: the plain challenge, no error.
      if (scheme.toLowerCase() !== 'bearer') return missingToken(realm);
      if (rest.length !== 1 || !TOKEN_PATTERN.test(rest[0])) return invalidRequest(realm, 'Malformed Bearer credentials.');
      if (rest[0].length > MAX_TOKEN_LENGTH) return invalidToken(realm, TOO_LARGE);
      token = rest[0];
      if (token === usual) cacheKey = usualKey!;
      else {
        const digest = tokenDigest(token);
        cacheKey = typeof digest === 'string' ? digest : await digest;
      }
    }

    // The first request of a platform that never called ready() waits for the feed's first answer.
    if (feed) {
      try {
        await feed.start();
      } catch {
        // A first synchronisation that failed shows in the feed's verdict below (unavailable once stale).
      }
    }
    const outcome = known ? recheck(cacheKey, known) : await verifyToken(token, cacheKey);
    if (!('payload' in outcome)) return outcome;
    return authorizeRoute(outcome, token, method, path, target);
  }

  /** What may have changed since a cached token was verified: the clock, the JWKS, the revocation feed. */
  function recheck(cacheKey: string, known: VerifiedToken): VerifiedToken | Refusal {
    const nowSeconds = Math.floor(now() / 1000);
    // As jose decides: expired at exp <= now - tolerance, or once older than the longest lifetime.
    if (known.exp <= nowSeconds - clockTolerance || nowSeconds - known.iat > MAX_TOKEN_AGE_SECONDS + clockTolerance) {
      verified.delete(cacheKey);
      return invalidToken(realm, 'The access token expired.');
    }
    if (feed?.isVoidKey(known.kid)) {
      verified.delete(cacheKey);
      return invalidToken(realm, REVOKED);
    }
    // A kid the JWKS no longer publishes: its key was retired (a fresh token of it would be refused too).
    if (!jwks.isPublished(known.kid)) {
      verified.delete(cacheKey);
      return invalidToken(realm, UNKNOWN_KEY);
    }
    const verdict = feed ? feed.check(known.payload as JWTPayload) : 'ok';
    if (verdict === 'revoked') {
      verified.delete(cacheKey);
      return invalidToken(realm, REVOKED);
    }
    if (verdict === 'unavailable') return unavailable(5);
    return known;
  }

  /** The whole check of a token not seen before; a valid one is kept in the cache. */
  async function verifyToken(token: string, cacheKey: string): Promise<VerifiedToken | Refusal> {
    // jose's jwtVerify rules (token-check.ts), the signature on a key imported once per kid (rs256.ts).
    const parts = takeApart(token);
    if ('kind' in parts) return invalidToken(realm, describeDefect(parts));
    const { header } = parts;
    let valid: boolean;
    try {
      if (feed?.isVoidKey(header.kid)) throw new RevokedError();
      const key = await jwks.verificationKey(header);
      valid = await rs256.verify(key, parts.signingInput, parts.signature);
    } catch (error) {
      if (error instanceof JwksUnavailableError) return unavailable(cooldownMs / 1000);
      // A key the runtime refuses to use for this signature counts as a signature that does not verify.
      return invalidToken(realm, error instanceof RevokedError || error instanceof UnknownKeyError ? describeTokenError(error) : BAD_SIGNATURE);
    }
    if (!valid) return invalidToken(realm, BAD_SIGNATURE);
    if (parts.unencoded) return invalidToken(realm, MALFORMED);
    const checked = checkClaims(parts.payloadSegment, { issuer, audiences, now: Math.floor(now() / 1000), clockTolerance, maxTokenAge: MAX_TOKEN_AGE_SECONDS });
    if ('kind' in checked) return invalidToken(realm, describeDefect(checked));
    const payload = checked.claims as JWTPayload;
    const typ = header.typ;
    const kid = header.kid as string; // verificationKey refused a token without one
    // jose checks sub's presence, not its type: the agent id is a string.
    if (typeof payload.sub !== 'string' || payload.sub === '') return invalidToken(realm, 'The access token has an invalid sub claim.');
    const profile = payload.svc_token_profile;
    const expectedTyp = typeof profile === 'string' && Object.hasOwn(PROFILE_TYP, profile) ? PROFILE_TYP[profile] : undefined;
    if (expectedTyp === undefined) return invalidToken(realm, 'The access token has an unknown profile.');
    if (typeof typ !== 'string' || typ.toLowerCase().replace(/^application\//, '') !== expectedTyp) {
      return invalidToken(realm, 'The access token has a type (typ) that does not match its profile.');
    }
    // Revoked before expiry: 401 invalid_token, so the agent client fetches a new token.
    const verdict = feed ? feed.check(payload) : 'ok';
    if (verdict === 'revoked') return invalidToken(realm, REVOKED);
    if (verdict === 'unavailable') return unavailable(5);
    // The service binds a token to exactly one platform: `aud` is the platform id, or (oauth-at-jwt for a
    // resource, RFC 9068) [resource, platform id]. Anything else is not a token it minted.
    const audience = tokenAudience(payload.aud, platformId, resources);
    if (audience === undefined) return invalidToken(realm, 'The access token has an unexpected audience.');
    const scopes = typeof payload.scope === 'string' ? payload.scope.split(' ').filter(Boolean) : [];
    const result: VerifiedToken = {
      payload: deepFreeze(payload),
      kid,
      scopes: Object.freeze(scopes),
      resource: audience.resource,
      exp: payload.exp as number,
      iat: payload.iat as number,
    };
    verified.set(cacheKey, result);
    return result;
  }

  function authorizeRoute(token: VerifiedToken, raw: string, method: string, path: string | undefined, target: RouteTarget | undefined): AuthorizeResult {
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
  }

  return {
    platformId,
    realm,
    authorize,
    routeFor: (method, path) => routes.match(method, path),
    ready,
    resources,
    close: () => {
      jwks.close();
      feed?.close();
    },
    revocationStats: () => feed?.stats(),
    protectedResourceMetadata: () => (metadata ? { ...metadata } : undefined),
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

export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource';

/** The `resource` option in normal form, or a TypeError saying why the service would never issue for it. */
function resourceOption(text: string): string {
  const check = normaliseResource(text);
  if (!check.ok) throw new TypeError(`createVerifier: resource ${JSON.stringify(text.slice(0, 200))} ${check.reason}`);
  return check.resource;
}

/** The scope file's `resources` (written by the service, so already normal; a foreign spelling is normalised or left out). */
function knownResources(listed: readonly string[]): string[] {
  return listed.flatMap((text) => {
    const check = normaliseResource(text);
    return check.ok ? [check.resource] : [];
  });
}

/**
 * `aud` as the service writes it: the platform id alone, or [resource, platform id] with a resource of
 * this platform. Undefined for anything else (another shape, a stranger's resource, no platform id).
 */
function tokenAudience(aud: unknown, platformId: string, resources: readonly string[]): { resource: string | undefined } | undefined {
  if (aud === platformId) return { resource: undefined };
  if (!Array.isArray(aud) || aud.length !== 2 || aud[1] !== platformId) return undefined;
  const [resource] = aud as unknown[];
  return typeof resource === 'string' && resources.includes(resource) ? { resource } : undefined;
}

/** Rejects unless the service's own scope file (public, current) lists the resource for this platform. */
async function checkResourceRegistered(args: { serviceUrl: string; platformId: string; resource: string; fetch: typeof fetch; timeoutMs: number }): Promise<void> {
  const url = `${args.serviceUrl}/api/v1/platforms/${args.platformId}/scopes.yaml`;
  const response = await args.fetch(url, { signal: AbortSignal.timeout(args.timeoutMs), headers: { accept: 'text/yaml' } });
  if (!response.ok) throw new ResourceNotRegisteredError(`ready(): the service answered ${response.status} for ${url}; cannot check the resource option`);
  const document = loadScopeFile({ scopesYaml: await response.text(), scopesOrigin: url });
  const known = new Set([...knownResources(document.resources ?? []), `urn:uuid:${args.platformId}`]);
  if (!known.has(args.resource)) {
    throw new ResourceNotRegisteredError(
      `ready(): the service issues no token for resource ${args.resource} on platform ${args.platformId} ` +
        `(it knows ${[...known].join(', ')}): register it (ace platform update ${args.platformId} --resource ${args.resource}) or fix the resource option`,
    );
  }
}

/** `ready()` found that the service would not issue tokens for the `resource` option (or could not ask). */
export class ResourceNotRegisteredError extends Error {
  readonly code = 'ERR_ACE_RESOURCE_NOT_REGISTERED';
  override name = 'ResourceNotRegisteredError';
}

const REVOKED = 'The access token was revoked.';
const UNKNOWN_KEY = 'The access token is signed with an unknown key.';
const TOO_LARGE = `The access token is larger than ${MAX_TOKEN_LENGTH} bytes.`;

function positiveInteger(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new TypeError(`createVerifier: ${name} must be a positive integer, got ${String(value)}`);
  return value;
}

/** Freezes a verified payload and what it holds (`aud`, nested claims): it is shared among requests. */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const member of Object.values(value)) deepFreeze(member);
  }
  return value;
}

/** The token's key is void in the revocation feed. */
class RevokedError extends Error {}

const MALFORMED = 'The access token is malformed.';
const BAD_SIGNATURE = 'The access token signature is invalid.';

/** A short, safe description for error_description (never echoes the token). */
function describeTokenError(error: unknown): string {
  if (error instanceof RevokedError) return REVOKED;
  if (error instanceof UnknownKeyError) return UNKNOWN_KEY;
  return MALFORMED;
}

/** The description of a defect the token checks found (the wording jose's errors were given). */
function describeDefect(defect: TokenDefect): string {
  switch (defect.kind) {
    case 'malformed':
      return MALFORMED;
    case 'crit':
      // An extension named in the `crit` header that this verifier does not implement (RFC 7515 section 4.1.11).
      return 'The access token names a critical header parameter (crit) that is not supported.';
    case 'alg':
      return 'The access token uses an algorithm that is not accepted.';
    case 'missing':
      return `The access token lacks the ${defect.claim} claim.`;
    case 'iss':
      return 'The access token has an unexpected issuer.';
    case 'aud':
      return 'The access token is meant for another platform.';
    case 'nbf':
      return 'The access token is not valid yet.';
    case 'expired':
      return 'The access token expired.';
    case 'future':
      return 'The access token is issued in the future.';
    case 'invalid':
      return `The access token has an invalid ${defect.claim} claim.`;
  }
}
