// The four endpoints of the public contract (and the OpenAPI document). Thin: parse, validate, call the
// domain, shape the reply.
import { ServiceError, toServiceError } from '../../core/errors.js';
import type { Metrics } from '../telemetry/index.js';
import { credentialsRequestSchema, tokenRequestSchema, UUID_PATTERN, type PlatformListing, type TokenRequest as TokenRequestBody } from './schemas/public.js';
import { compileValidator } from './schemas/validate.js';
import type { Authenticator } from '../../core/credentials/authenticator.js';
import type { KeyManager } from '../../core/keys/key-manager.js';
import type { ListedPlatform, PlatformService } from '../../core/platforms/platform-service.js';
import type { ScopeFiles } from './scope-file.js';
import type { ExchangeOutcome, TokenService } from '../../core/tokens/token-service.js';
import { parseJsonBody } from './json-body.js';
import { auditEvents, type AuditSink } from '../../core/audit/events.js';
import { json, type HttpReply, type HttpRequest, type Route } from './types.js';

export interface PublicDeps {
  apiKeyPrefix: string;
  tokens: TokenService;
  authenticator: Authenticator;
  platforms: PlatformService;
  scopeFiles: ScopeFiles;
  keys: KeyManager;
  metrics: Metrics;
  openApi: () => Buffer;
  audit: AuditSink;
  /** Token refusals: recorded (bounded per address and agent) or counted (audit-trail/refusals.ts). */
  refusals: TokenRefusals;
}

/** What the token route reports of a refusal (implemented by the audit trail's RefusalRecorder). */
export interface TokenRefusals {
  refused(refusal: { errorCode: string; agentId?: string; apiKeyId?: string; platformId?: string; clientAddress: string; checked: boolean }): void;
}

// Token responses must never be stored by intermediaries (RFC 6749 §5.1).
const NO_STORE = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };
const UUID = new RegExp(UUID_PATTERN);

export function publicRoutes(deps: PublicDeps): Route[] {
  const validateToken = compileValidator(tokenRequestSchema(deps.apiKeyPrefix));
  const validateCredentials = compileValidator(credentialsRequestSchema(deps.apiKeyPrefix));

  const token = async (request: HttpRequest): Promise<HttpReply> => {
    let body: TokenRequestBody | undefined;
    let outcome: ExchangeOutcome;
    try {
      body = validateToken(parseJsonBody(request));
      outcome = await deps.tokens.exchange(
        { apiKeyId: body.api_key_id, secret: body.secret, platformId: body.platform_id, scopes: body.scopes, profile: body.profile },
        request.address,
        request.signal,
      );
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      outcome = { refused: error, agentId: undefined };
    }
    if ('issued' in outcome) {
      deps.metrics.tokenOutcome('issued');
      const { accessToken, expiresIn } = outcome.issued;
      return json(200, { access_token: accessToken, token_type: 'Bearer', expires_in: expiresIn }, NO_STORE);
    }
    const error = toServiceError(outcome.refused);
    deps.metrics.tokenOutcome(outcome.refused instanceof ServiceError ? error.code : 'unavailable');
    // Recorded in the next batch without holding the answer: a refusal costs the same with or without
    // an agent behind the key id (no timing signal), and an audit outage never turns 401 into 503.
    // Only refusals of a credential check are recorded (bounded); earlier ones are counted (refusals.ts).
    if (!request.signal.aborted) {
      deps.refusals.refused({
        errorCode: error.code,
        agentId: outcome.agentId,
        apiKeyId: body?.api_key_id,
        platformId: body?.platform_id.toLowerCase(),
        clientAddress: request.address,
        checked: outcome.agentId !== undefined || error.code === 'invalid_credentials',
      });
    }
    throw error;
  };

  const listing = async (request: HttpRequest): Promise<HttpReply> => {
    const body = validateCredentials(parseJsonBody(request));
    const view = await deps.authenticator.authenticate({
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

  return [
    { method: 'POST', path: '/api/v1/auth/token', name: 'token', body: true, handler: token },
    { method: 'POST', path: '/api/v1/auth/agents/me/platforms', name: 'platform_listing', body: true, handler: listing },
    { method: 'GET', path: '/.well-known/jwks.json', name: 'jwks', handler: jwks },
    { method: 'GET', path: '/api/v1/platforms/:platform_id/scopes.yaml', name: 'scope_file', handler: scopeFile },
    { method: 'GET', path: '/openapi.json', name: 'openapi', handler: openApi },
  ];
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
