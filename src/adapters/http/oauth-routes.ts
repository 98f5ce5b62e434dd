// The OAuth 2.0 front door: the client-credentials grant (RFC 6749 §4.4) and the authorization server
// metadata (RFC 8414). A second door to the same exchange as the contract's endpoint: the form becomes
// the core's TokenRequest (profile oauth-at-jwt), TokenService.exchange decides (secret check, limits,
// audit), the outcome is counted by the same TokenDoor as the contract's (token-door.ts), and
// its refusal codes become OAuth error codes (RFC 6749 §5.2, RFC 8707). This file only reads the form and
// renders answers.
import type { ErrorCode, ServiceError } from '../../core/errors.js';
import { OAUTH_PROFILE, type TokenRequest, type TokenService } from '../../core/tokens/token-service.js';
import type { ResourceIndex } from '../../core/platforms/resource-index.js';
import type { HttpMetrics } from './http-metrics.js';
import { httpStatus } from './errors.js';
import { TokenDoor, type UncheckedRefusalCount } from './token-door.js';
import { FormError, formDecode, parseFormBody } from './form-body.js';
import { UUID_PATTERN } from './schemas/public.js';
import { normaliseResource } from '@agent-credential-exchange/protocol/resource-identifier';
import { bindRoutes, json, MAX_BODY_BYTES, type HttpReply, type HttpRequest, type ResponseSpec, type Route, type RouteDeclaration } from './types.js';
import { fixedHeader, refusals } from './responses.js';
import { AuthorizationServerMetadata, OAuthErrorBody, OAuthTokenRequest, OAuthTokenResponse } from './schemas/oauth.js';
import { Type } from '@sinclair/typebox';

export const OAUTH_TOKEN_PATH = '/oauth2/token';
export const OAUTH_AUTHORIZE_PATH = '/oauth2/authorize';
export const OAUTH_METADATA_PATH = '/.well-known/oauth-authorization-server';
const BASIC_REALM = 'agent-credential-exchange';
const NO_STORE = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };
const UUID = new RegExp(UUID_PATTERN);
const URN_UUID = /^urn:uuid:(.+)$/i;
// RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E )
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;
const MAX_SECRET = 1024;

export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'unsupported_response_type'
  | 'invalid_scope'
  | 'invalid_target'
  | 'rate_limited'
  | 'temporarily_unavailable'
  | 'server_error';

export interface OAuthDeps {
  apiKeyPrefix: string;
  /** The tokens' `iss` (config ISSUER) and where this service is reached (config PUBLIC_BASE_URL). */
  issuer: string;
  publicBaseUrl: string;
  tokens: TokenService;
  /** Resource identifier → platform (RFC 8707 resource). */
  resources: Pick<ResourceIndex, 'lookup'>;
  metrics: HttpMetrics;
  /** Token refusals before any credential check, counted as the contract door's are. */
  unchecked: UncheckedRefusalCount;
}

/** An OAuth error answer: RFC 6749 §5.2 members, plus the contract's `detail`/`error_code` pair. */
class OAuthError extends Error {
  constructor(
    readonly error: OAuthErrorCode,
    readonly status: number,
    description: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(description);
  }

  reply(): HttpReply {
    return json(
      this.status,
      { error: this.error, error_description: this.message, detail: this.message, error_code: this.error },
      { ...NO_STORE, ...this.headers },
    );
  }
}

const invalidRequest = (description: string) => new OAuthError('invalid_request', 400, description);
const invalidTarget = (description: string) => new OAuthError('invalid_target', 400, description);

/** RFC 7521 §4.2: the only client assertion type: a JWT (RFC 7523 §2.2). */
const JWT_BEARER_ASSERTION = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** RFC 7523 §2.1: the assertion is the authorization grant (MCP workload identity federation, SEP-1933). */
const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
/** What private_key_jwt assertions may be signed with: never `none`, never HMAC. */
export const ASSERTION_SIGNING_ALGS = ['ES256', 'RS256', 'PS256', 'EdDSA'];

type ClientCredentials =
  /** `basic`: Basic was used, so a 401 carries WWW-Authenticate (RFC 6749 §5.2). */
  | { apiKeyId: string; secret: string; basic: boolean }
  /** A client assertion: private_key_jwt, or a workload token; `apiKeyId` is '' when client_id was not sent. */
  | { apiKeyId: string; assertion: string; basic: false };

/** RFC 8414 metadata. `issuer` is exactly the tokens' `iss`. */
export function authorizationServerMetadata(deps: Pick<OAuthDeps, 'issuer' | 'publicBaseUrl'>): Record<string, unknown> {
  const base = deps.publicBaseUrl;
  return {
    issuer: deps.issuer,
    // RFC 8414 §2 needs no authorization endpoint when no grant uses one, but clients with a stricter
    // schema (the MCP SDK's) refuse metadata without it. It exists and answers what is true: no response
    // type is supported (RFC 6749 §4.1.2.1).
    authorization_endpoint: `${base}${OAUTH_AUTHORIZE_PATH}`,
    token_endpoint: `${base}${OAUTH_TOKEN_PATH}`,
    jwks_uri: `${base}/.well-known/jwks.json`,
    grant_types_supported: ['client_credentials', JWT_BEARER_GRANT],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'private_key_jwt'],
    token_endpoint_auth_signing_alg_values_supported: ASSERTION_SIGNING_ALGS,
    // REQUIRED by RFC 8414 §2; the authorization endpoint supports no response type: the honest value is empty.
    response_types_supported: [],
    service_documentation: `${base}/openapi.json`,
    // Scopes are per platform (its scope file), so no global scopes_supported. Extensions (RFC 8414 §2
    // allows more members): how to name the platform and where its scopes are.
    ace_resource_formats: ['<a resource identifier registered to the platform>', 'https://<verified domain of the platform>', 'urn:uuid:<platform_id>'],
    ace_audience_parameter: 'audience=<platform_id>',
    ace_scope_file_template: `${base}/api/v1/platforms/{platform_id}/scopes.yaml`,
    ace_token_profile: OAUTH_PROFILE,
    ace_revocation_feed_template: `${base}/api/v1/platforms/{platform_id}/revocations`,
  };
}

const AUTHORIZE_QUERY = Type.Object({
  response_type: Type.Optional(Type.String({ description: 'Any value is refused: no response type is supported.' })),
  client_id: Type.Optional(Type.String()),
  redirect_uri: Type.Optional(Type.String()),
  scope: Type.Optional(Type.String()),
  state: Type.Optional(Type.String()),
  resource: Type.Optional(Type.String({ description: 'RFC 8707 resource indicator.' })),
  code_challenge: Type.Optional(Type.String({ description: 'RFC 7636.' })),
  code_challenge_method: Type.Optional(Type.String({ description: 'RFC 7636.' })),
});

const RETRY_AFTER = { 'Retry-After': { description: 'Seconds to wait (integer, at least 1).', schema: Type.Integer({ minimum: 1 }) } };
const oauthError = (description: string, headers?: ResponseSpec['headers']): ResponseSpec => ({
  description,
  ...(headers ? { headers } : {}),
  content: { 'application/json': OAuthErrorBody },
});

/** The OAuth door as data (the server and the OpenAPI document read it). */
export const oauthRouteTable = {
  token: {
    method: 'POST', path: OAUTH_TOKEN_PATH, name: 'oauth_token', operationId: 'oauthClientCredentials',
    summary: 'OAuth 2.0 client credentials grant (RFC 6749 §4.4): the same exchange, profile oauth-at-jwt',
    description:
      'client_id is the api_key_id. The platform is named by resource (RFC 8707: one of its registered resource identifiers, ' +
      'https://<verified domain> or urn:uuid:<platform_id>; the token\'s aud is then [resource, platform_id]) and/or audience ' +
      '(<platform_id>). A resource that names no platform is refused after the credential check, like a platform without a grant. ' +
      'scope is space-delimited; empty means every granted scope. ' +
      'Same secret check, limits, audit events and metrics as POST /api/v1/auth/token. Errors follow RFC 6749 §5.2 ' +
      '(error, error_description) and also carry detail and error_code (equal to error).',
    body: { schema: OAuthTokenRequest, contentType: 'application/x-www-form-urlencoded', required: true },
    // RFC 6749 §2.3.1: Basic, or client_id + client_secret in the form (client_secret_post).
    auth: { schemes: { clientSecretBasic: { type: 'http', scheme: 'basic', description: 'client_secret_basic: api_key_id and secret, each form-urlencoded.' } }, optional: true },
    audit: { kind: 'batched', events: ['token.issued', 'token.refused'] },
    responses: {
      200: {
        description: 'Token issued (RFC 6749 §5.1): an RFC 9068 JWT access token (header typ at+jwt).',
        headers: { 'Cache-Control': fixedHeader('no-store') },
        content: { 'application/json': OAuthTokenResponse },
      },
      400: oauthError('invalid_request (not a form, a parameter twice, two authentication methods, grant_type missing), unsupported_grant_type, invalid_scope, invalid_target (RFC 8707: no platform named, a malformed resource, or, after the credential check, a resource naming no platform or a platform not granted), unauthorized_client (the agent is inactive).'),
      401: oauthError('invalid_client: unknown client_id, wrong secret or no client authentication; WWW-Authenticate: Basic when Basic was used.', {
        'WWW-Authenticate': { schema: Type.String() },
      }),
      ...refusals({ payload_too_large: `body over ${MAX_BODY_BYTES / 1024} KiB.` }),
      429: oauthError('rate_limited: the per-api_key_id token limit (shared with /api/v1/auth/token), or failed authentications per address.', RETRY_AFTER),
      503: oauthError('temporarily_unavailable.', RETRY_AFTER),
    },
  },
  authorize: {
    method: 'GET', path: OAUTH_AUTHORIZE_PATH, name: 'oauth_authorize', operationId: 'oauthAuthorize',
    summary: 'OAuth 2.0 authorization endpoint: no response type is supported (client credentials only)',
    description:
      'Named in the metadata for clients that require the member (the MCP SDK). Every request is answered 400 ' +
      'unsupported_response_type (RFC 6749 §4.1.2.1); it never redirects, as no client has a redirection URI.',
    // Declared so that typed clients can send an authorization request (RFC 6749 §4.1.1, RFC 7636, RFC 8707);
    // none of them changes the answer.
    query: AUTHORIZE_QUERY,
    auth: 'none',
    audit: { kind: 'none' },
    responses: {
      400: oauthError('unsupported_response_type.'),
      ...refusals({ method_not_allowed: 'a method other than GET or HEAD.' }),
    },
  },
  metadata: {
    method: 'GET', path: OAUTH_METADATA_PATH, name: 'oauth_metadata', operationId: 'getAuthorizationServerMetadata',
    summary: "OAuth 2.0 authorization server metadata (RFC 8414); issuer is the tokens' iss",
    auth: 'none',
    audit: { kind: 'none' },
    responses: {
      200: { description: 'The metadata document.', headers: { 'Cache-Control': fixedHeader('public, max-age=300') }, content: { 'application/json': AuthorizationServerMetadata } },
      ...refusals({ method_not_allowed: 'a method other than GET or HEAD.' }),
    },
  },
} satisfies Record<string, RouteDeclaration>;

export function oauthRoutes(deps: OAuthDeps): Route[] {
  const apiKeyId = new RegExp(`^${deps.apiKeyPrefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}[0-9a-f]{32}$`);
  const { resources } = deps;
  const metadataBody = JSON.stringify(authorizationServerMetadata(deps));

  const door = new TokenDoor({ tokens: deps.tokens, metrics: deps.metrics, unchecked: deps.unchecked });
  const token = async (request: HttpRequest): Promise<HttpReply> => {
    let grant: ClientCredentialsGrant;
    try {
      grant = await readGrant(request, apiKeyId, resources);
    } catch (error) {
      // Refused before the exchange (the form, the client's credentials' format, the target): counted and
      // recorded as the contract's door records a body that fails validation.
      if (error instanceof OAuthError) {
        door.refusedForm(request);
        return error.reply();
      }
      return oauthRefusal(door.refusedRead(request, error), false).reply();
    }
    const outcome = await door.exchange(request, grant.tokenRequest);
    if ('refused' in outcome) return oauthRefusal(outcome.refused, grant.basic, grant.jwtBearer).reply();
    const { accessToken, expiresIn, scope } = outcome.issued;
    return json(200, { access_token: accessToken, token_type: 'Bearer', expires_in: expiresIn, scope }, NO_STORE);
  };

  const metadata = (): HttpReply => ({
    status: 200,
    headers: { 'Content-Type': 'application/json', 'Cache-Control': 'public, max-age=300' },
    body: metadataBody,
  });

  const authorize = (): HttpReply =>
    new OAuthError('unsupported_response_type', 400, 'No response type is supported: this server issues tokens by the client credentials grant only.').reply();

  return bindRoutes(oauthRouteTable, { token, authorize, metadata });
}

/**
 * The grant as the core's TokenRequest; `basic`: a 401 then carries WWW-Authenticate; `jwtBearer`: the
 * assertion was the grant (a refused one is invalid_grant, RFC 7523 §3.1).
 */
interface ClientCredentialsGrant {
  tokenRequest: TokenRequest;
  basic: boolean;
  jwtBearer?: boolean;
}

/** Reads the form; throws an OAuthError (or a store outage). */
async function readGrant(request: HttpRequest, apiKeyId: RegExp, resources: OAuthDeps['resources']): Promise<ClientCredentialsGrant> {
  const params = readForm(request);
  const grantType = params.get('grant_type');
  if (grantType === JWT_BEARER_GRANT) return jwtBearerGrant(request, params, apiKeyId, resources);
  // As before the jwt-bearer grant: the client's authentication first (a request without any is 401).
  const client = clientCredentials(request.headers.authorization, params, apiKeyId);
  if (grantType === undefined) throw invalidRequest('grant_type is missing.');
  if (grantType !== 'client_credentials') throw new OAuthError('unsupported_grant_type', 400, `grant_type must be client_credentials or ${JWT_BEARER_GRANT}.`);
  const scopes = requestedScopes(params.get('scope'));
  // A store outage while reading the resource index is answered like any outage: 503.
  const { platformId, resource } = await target(params, resources);
  const credential = 'assertion' in client ? { assertion: client.assertion } : { secret: client.secret };
  const tokenRequest: TokenRequest = { apiKeyId: client.apiKeyId, ...credential, platformId, ...(resource !== undefined ? { resource } : {}), scopes, profile: OAUTH_PROFILE };
  return { tokenRequest, basic: client.basic };
}

/**
 * RFC 7523 §2.1 as MCP's workload identity federation (SEP-1933) uses it: `assertion` is a token of a trusted
 * workload issuer whose subject is bound to an agent, with `resource` and `scope`; no client authentication
 * (the token names the agent). A client_id may come along, and must then be the bound agent's. Another
 * credential beside it (Basic, client_secret, a client assertion) is refused: one credential a request.
 */
async function jwtBearerGrant(request: HttpRequest, params: Map<string, string>, apiKeyId: RegExp, resources: OAuthDeps['resources']): Promise<ClientCredentialsGrant> {
  if (request.headers.authorization !== '' || params.has('client_secret') || params.has('client_assertion') || params.has('client_assertion_type')) {
    throw invalidRequest('The jwt-bearer grant is the credential: send the assertion alone (a client_id may come along), without Basic, client_secret or a client assertion.');
  }
  const assertion = params.get('assertion');
  if (assertion === undefined || assertion === '') throw invalidRequest('assertion is missing.');
  const id = params.get('client_id');
  if (id !== undefined && !apiKeyId.test(id)) throw new OAuthError('invalid_grant', 400, 'The assertion is not a valid grant.');
  const scopes = requestedScopes(params.get('scope'));
  const { platformId, resource } = await target(params, resources);
  const tokenRequest: TokenRequest = { apiKeyId: id ?? '', assertion, assertionAs: 'authorization_grant', platformId, ...(resource !== undefined ? { resource } : {}), scopes, profile: OAUTH_PROFILE };
  return { tokenRequest, basic: false, jwtBearer: true };
}

function readForm(request: HttpRequest): Map<string, string> {
  try {
    return parseFormBody(request.headers.contentType, request.body);
  } catch (error) {
    if (error instanceof FormError) throw invalidRequest(error.message);
    throw error;
  }
}

/**
 * client_secret_basic (RFC 6749 §2.3.1: form-encoded id and secret inside Basic), client_secret_post, or a
 * client assertion (RFC 7521 §4.2: private_key_jwt, a workload token); exactly one.
 */
function clientCredentials(authorization: string, params: Map<string, string>, apiKeyId: RegExp): ClientCredentials {
  const assertionType = params.get('client_assertion_type');
  const assertion = params.get('client_assertion');
  if (assertionType !== undefined || assertion !== undefined) {
    if (authorization !== '' || params.has('client_secret')) throw invalidRequest('Use one client authentication method: a client assertion, Basic or client_secret, not several.');
    if (assertionType !== JWT_BEARER_ASSERTION) throw invalidRequest(`client_assertion_type must be ${JWT_BEARER_ASSERTION}.`);
    if (assertion === undefined || assertion === '') throw invalidRequest('client_assertion is missing.');
    const id = params.get('client_id');
    // A malformed client_id is refused like an unknown client.
    if (id !== undefined && !apiKeyId.test(id)) throw invalidClient(false, 'Invalid client credentials.');
    return { apiKeyId: id ?? '', assertion, basic: false };
  }
  const inBody = params.has('client_secret');
  const scheme = authorization.trim().split(/\s+/, 1)[0] ?? '';
  const basic = scheme.toLowerCase() === 'basic';
  if (authorization !== '' && !basic) throw invalidClient(false, 'Client authentication must use Basic or client_secret_post.');
  let id: string | undefined;
  let secret: string | undefined;
  if (basic) {
    if (inBody) throw invalidRequest('Use one client authentication method: Basic or client_secret in the body, not both.');
    const decoded = Buffer.from(authorization.trim().slice(scheme.length).trim(), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) throw invalidClient(true, 'The Basic credentials are malformed.');
    id = formDecode(decoded.slice(0, colon));
    secret = formDecode(decoded.slice(colon + 1));
    const bodyId = params.get('client_id');
    if (bodyId !== undefined && bodyId !== id) throw invalidRequest('client_id in the body differs from the Basic credentials.');
  } else {
    id = params.get('client_id');
    secret = params.get('client_secret');
    if (id === undefined || secret === undefined) throw invalidClient(false, 'Client authentication is missing: Basic, or client_id and client_secret in the body.');
  }
  // The id's format is public (docs/contract.md): a malformed one is refused like an unknown one.
  if (id === undefined || secret === undefined || !apiKeyId.test(id) || secret === '' || secret.length > MAX_SECRET) {
    throw invalidClient(basic, 'Invalid client credentials.');
  }
  return { apiKeyId: id, secret, basic };
}

function invalidClient(basic: boolean, description: string): OAuthError {
  return new OAuthError('invalid_client', 401, description, basic ? { 'WWW-Authenticate': `Basic realm="${BASIC_REALM}", charset="UTF-8"` } : {});
}

/** RFC 6749 §3.3: space-delimited; absent or empty means every scope the grant holds. */
function requestedScopes(scope: string | undefined): string[] {
  if (scope === undefined) return [];
  const tokens = scope.split(' ').filter((s) => s !== '');
  for (const token of tokens) if (!SCOPE_TOKEN.test(token)) throw new OAuthError('invalid_scope', 400, 'The scope parameter has characters RFC 6749 §3.3 does not allow.');
  return tokens;
}

/** What the form names: the platform (undefined: none that can be told, refused after the credential check) and the resource. */
interface Target {
  platformId: string | undefined;
  resource: string | undefined;
}

/**
 * The platform: `resource` (RFC 8707: a registered resource identifier, https://<verified domain> or
 * urn:uuid:<platform_id>) and/or `audience` (its id). A malformed value is refused at once (its form is
 * public); a well-formed one that names no platform, or one that disagrees with `audience`, is not: it
 * goes through the credential check and is refused there like a platform without a grant, so that no
 * answer tells a caller without credentials which resources exist.
 */
async function target(params: Map<string, string>, resources: OAuthDeps['resources']): Promise<Target> {
  const resource = params.get('resource');
  const audience = params.get('audience');
  if (resource === undefined && audience === undefined) throw invalidTarget('Name the platform: resource (its resource identifier, https://<domain> or urn:uuid:<platform_id>) or audience (platform_id).');
  if (audience !== undefined && !UUID.test(audience)) throw invalidTarget('audience must be a platform_id (UUID).');
  const fromAudience = audience?.toLowerCase();
  if (resource === undefined) return { platformId: fromAudience, resource: undefined };
  const named = await resourcePlatform(resource, resources);
  if (fromAudience !== undefined && named.platformId !== fromAudience) return { platformId: undefined, resource: named.resource };
  return named;
}

async function resourcePlatform(resource: string, resources: OAuthDeps['resources']): Promise<Target> {
  const urn = URN_UUID.exec(resource);
  if (urn) {
    if (!UUID.test(urn[1]!)) throw invalidTarget('resource urn:uuid: must carry a platform_id (UUID).');
    const platformId = urn[1]!.toLowerCase();
    return { platformId, resource: `urn:uuid:${platformId}` };
  }
  const check = normaliseResource(resource);
  if (!check.ok) throw invalidTarget(`resource ${check.reason}.`);
  return { platformId: await resources.lookup(check.resource), resource: check.resource };
}

/** The core's refusal codes as OAuth errors (RFC 6749 §5.2, RFC 8707 §2); Retry-After is kept. */
function oauthRefusal(refusal: ServiceError, basic: boolean, jwtBearer = false): OAuthError {
  const retry: Record<string, string> = refusal.retryAfterSeconds !== undefined ? { 'Retry-After': String(refusal.retryAfterSeconds) } : {};
  const map: Partial<Record<ErrorCode, () => OAuthError>> = {
    // RFC 7523 §3.1: a grant assertion that is not valid is invalid_grant, not a client's failure.
    invalid_credentials: () => (jwtBearer ? new OAuthError('invalid_grant', 400, 'The assertion is not a valid grant.') : invalidClient(basic, 'Invalid client credentials.')),
    agent_inactive: () => new OAuthError('unauthorized_client', 400, refusal.message),
    platform_access_denied: () => invalidTarget(refusal.message),
    invalid_scope: () => new OAuthError('invalid_scope', 400, refusal.message),
    validation_error: () => invalidRequest(refusal.message),
    rate_limited: () => new OAuthError('rate_limited', 429, refusal.message, retry),
    service_unavailable: () => new OAuthError('temporarily_unavailable', 503, refusal.message, retry),
  };
  return map[refusal.code]?.() ?? new OAuthError('server_error', Math.max(httpStatus(refusal), 500), 'Internal error.', retry);
}
