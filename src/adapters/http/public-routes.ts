// The four endpoints of the public contract (and the OpenAPI document). The table declares each route as
// data (schemas, answers, auth, audit: the OpenAPI document is generated from it); the handlers are thin:
// parse, validate, call the domain, shape the reply. The token exchange's outcome (metric, audit record)
// is handled by TokenDoor (token-door.ts), shared with the OAuth door (oauth-routes.ts).
import { Type } from '@sinclair/typebox';
import { ServiceError } from '../../core/errors.js';
import type { HttpMetrics } from './http-metrics.js';
import {
  credentialsRequestSchema,
  KeySet,
  PlatformId,
  PlatformListing,
  tokenRequestSchema,
  TokenResponse,
  UUID_PATTERN,
} from './schemas/public.js';
import { SvcScopesYaml } from '@agent-credential-exchange/protocol/scopes-file';
import { compileValidator } from './schemas/validate.js';
import type { Authenticator } from '../../core/credentials/authenticator.js';
import type { KeyManager } from '../../core/keys/key-manager.js';
import type { ListedPlatform, PlatformService } from '../../core/platforms/platform-service.js';
import type { ScopeFiles } from './scope-file.js';
import type { TokenRequest, TokenService } from '../../core/tokens/token-service.js';
import { TokenDoor, type UncheckedRefusalCount } from './token-door.js';
import { parseJsonBody } from './json-body.js';
import { auditEvents, type AuditSink } from '../../core/audit/events.js';
import { ETAG_HEADER, fixedHeader, JSON_BODY_REFUSALS, NOT_MODIFIED, refusals } from './responses.js';
import { bindRoutes, json, refusalReply, type HttpReply, type HttpRequest, type Route, type RouteDeclaration } from './types.js';

export interface PublicDeps {
  apiKeyPrefix: string;
  tokens: TokenService;
  authenticator: Authenticator;
  platforms: PlatformService;
  scopeFiles: ScopeFiles;
  keys: KeyManager;
  metrics: HttpMetrics;
  openApi: () => Buffer;
  audit: AuditSink;
  /** Token refusals before any credential check (counted; the core records the others). */
  unchecked: UncheckedRefusalCount;
}

// Token responses must never be stored by intermediaries (RFC 6749 §5.1).
const NO_STORE = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };
const UUID = new RegExp(UUID_PATTERN);


/** The public routes as data; `apiKeyPrefix` is the deployment's (the api_key_id pattern carries it). */
export function publicRouteTable(apiKeyPrefix: string) {
  const noStore = { 'Cache-Control': fixedHeader('no-store'), Pragma: fixedHeader('no-cache') };
  const table = {
    token: {
      method: 'POST', path: '/api/v1/auth/token', name: 'token', operationId: 'exchangeToken',
      summary: 'Exchange agent credentials for a token',
      description: 'Trades api_key_id + secret + platform_id for a short-lived RS256 JWT whose aud is the platform.',
      body: { schema: tokenRequestSchema(apiKeyPrefix), contentType: 'application/json', required: true },
      auth: 'none',
      audit: { kind: 'batched', events: ['token.issued', 'token.refused'] },
      responses: {
        200: { description: 'Token issued.', headers: noStore, content: { 'application/json': TokenResponse } },
        ...refusals({
          ...JSON_BODY_REFUSALS,
          invalid_credentials: 'unknown api_key_id or wrong secret; identical for both.',
          agent_inactive: '',
          platform_access_denied: '',
          invalid_scope: '',
          validation_error: 'a field is missing or malformed (the detail names it).',
          unsupported_profile: '',
          rate_limited: 'per api_key_id, or failed authentications per address.',
          service_unavailable: '',
        }),
      },
    },
    listing: {
      method: 'POST', path: '/api/v1/auth/agents/me/platforms', name: 'platform_listing', operationId: 'listAgentPlatforms',
      summary: "List the calling agent's platforms (client bootstrap)",
      body: { schema: credentialsRequestSchema(apiKeyPrefix), contentType: 'application/json', required: true },
      auth: 'none',
      audit: { kind: 'batched', events: ['listing.served'] },
      responses: {
        200: { description: 'Platform listing.', headers: noStore, content: { 'application/json': PlatformListing } },
        ...refusals({ ...JSON_BODY_REFUSALS, invalid_credentials: '', agent_inactive: '', validation_error: '', rate_limited: '', service_unavailable: '' }),
      },
    },
    jwks: {
      method: 'GET', path: '/.well-known/jwks.json', name: 'jwks', operationId: 'getJwks',
      summary: 'Public signing keys',
      auth: 'none',
      audit: { kind: 'none' },
      responses: {
        200: {
          description: 'Key set: the active key first, then published keys that are not active.',
          headers: { 'Cache-Control': fixedHeader('public, max-age=3600'), ETag: ETAG_HEADER },
          content: { 'application/json': KeySet },
        },
        304: NOT_MODIFIED,
        // The server's own answer to a method other than GET/HEAD (with Allow).
        ...refusals({ method_not_allowed: 'a method other than GET or HEAD.' }),
      },
    },
    scopeFile: {
      method: 'GET', path: '/api/v1/platforms/:platform_id/scopes.yaml', name: 'scope_file', operationId: 'getScopeFile',
      summary: 'Scope file of a platform (SvcScopesYaml v1)',
      params: { platform_id: PlatformId },
      auth: 'none',
      audit: { kind: 'none' },
      responses: {
        200: { description: 'The scope file.', headers: { ETag: ETAG_HEADER, 'Cache-Control': fixedHeader('no-cache') }, content: { 'text/yaml': SvcScopesYaml } },
        304: NOT_MODIFIED,
        ...refusals({ not_found: 'no platform with this id.', validation_error: 'platform_id is not a UUID.', service_unavailable: '' }),
      },
    },
    openApi: {
      method: 'GET', path: '/openapi.json', name: 'openapi', operationId: 'getOpenApiDocument',
      summary: 'This OpenAPI document',
      description: 'The same document as docs/openapi.json in the repository, with this deployment\'s PUBLIC_BASE_URL as its server.',
      auth: 'none',
      audit: { kind: 'none' },
      responses: {
        200: { description: 'OpenAPI 3.1 document.', content: { 'application/json': Type.Object({}, { additionalProperties: true }) } },
        ...refusals({ method_not_allowed: 'a method other than GET or HEAD.' }),
      },
    },
  } satisfies Record<string, RouteDeclaration>;
  return table;
}

export function publicRoutes(deps: PublicDeps): Route[] {
  const table = publicRouteTable(deps.apiKeyPrefix);
  const validateToken = compileValidator(table.token.body.schema);
  const validateCredentials = compileValidator(table.listing.body.schema);

  const door = new TokenDoor({ tokens: deps.tokens, metrics: deps.metrics, unchecked: deps.unchecked });
  const token = async (request: HttpRequest): Promise<HttpReply> => {
    let tokenRequest: TokenRequest;
    try {
      const body = validateToken(parseJsonBody(request));
      tokenRequest = { apiKeyId: body.api_key_id, secret: body.secret, platformId: body.platform_id, scopes: body.scopes, profile: body.profile };
    } catch (error) {
      return refusalReply(door.refusedRead(request, error));
    }
    const outcome = await door.exchange(request, tokenRequest);
    if ('refused' in outcome) return refusalReply(outcome.refused);
    const { accessToken, expiresIn } = outcome.issued;
    return json(200, { access_token: accessToken, token_type: 'Bearer', expires_in: expiresIn }, NO_STORE);
  };

  const listing = async (request: HttpRequest): Promise<HttpReply> => {
    const body = validateCredentials(parseJsonBody(request));
    const { view } = await deps.authenticator.authenticate({
      apiKeyId: body.api_key_id,
      secret: body.secret,
      address: request.address,
      signal: request.signal,
    });
    if (view.status !== 'active') throw new ServiceError('agent_inactive');
    const platforms = await deps.platforms.listing(view);
    deps.audit.emit(auditEvents.listingServed({ agentId: view.agentId, clientAddress: request.address }));
    return json(200, presentListing(view.agentId, platforms), NO_STORE);
  };

  const jwks = (request: HttpRequest): HttpReply => {
    const { body, etag } = deps.keys.jwks();
    const headers = { 'Content-Type': 'application/json', 'Cache-Control': 'public, max-age=3600', ETag: etag };
    if (matchesEtag(request.headers.ifNoneMatch, etag)) return { status: 304, headers, representationLength: body.length };
    return { status: 200, headers, body };
  };

  const scopeFile = async (request: HttpRequest): Promise<HttpReply> => {
    const id = request.params.platform_id;
    if (!UUID.test(id)) throw new ServiceError('validation_error', 'platform_id must be a UUID.');
    const file = await deps.scopeFiles.file(id);
    const headers = { 'Content-Type': 'text/yaml; charset=utf-8', ETag: file.etag, 'Cache-Control': 'no-cache' };
    if (matchesEtag(request.headers.ifNoneMatch, file.etag)) return { status: 304, headers, representationLength: file.body.length };
    return { status: 200, headers, body: file.body };
  };

  const openApi = (): HttpReply => ({ status: 200, headers: { 'Content-Type': 'application/json' }, body: deps.openApi() });

  return bindRoutes(table, { token, listing, jwks, scopeFile, openApi });
}

function presentListing(agentId: string, platforms: ListedPlatform[]): PlatformListing {
  return {
    agent_id: agentId,
    platforms: platforms.map((p) => ({
      platform_id: p.platformId,
      granted_scopes: p.grantedScopes,
      status: p.status,
      ...(p.name !== undefined ? { name: p.name } : {}),
      hostname: p.hostname,
      ...(p.verificationStatus !== undefined ? { verification_status: p.verificationStatus } : {}),
    })),
  };
}

/** RFC 9110 If-None-Match: `*` or a list of entity tags (weak comparison). */
export function matchesEtag(header: string, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === '*') return true;
  const bare = etag.replace(/^W\//, '');
  return header.split(',').some((tag) => tag.trim().replace(/^W\//, '') === bare);
}
