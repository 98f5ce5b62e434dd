// OpenAPI 3.1 document of the public contract, generated from the same TypeBox schemas the service
// validates with (never written by hand).
import { MAX_BODY_BYTES } from '../types.js';
import type { TSchema } from '@sinclair/typebox';
import { ERRORS } from '../../../core/errors.js';
import {
  credentialsRequestSchema,
  ErrorBody,
  KeySet,
  PlatformListing,
  TOKEN_PROFILE,
  TOKEN_PROFILES,
  tokenRequestSchema,
  TokenResponse,
} from '../schemas/public.js';
import { AuthorizationServerMetadata, OAuthErrorBody, OAuthTokenRequest, OAuthTokenResponse } from '../schemas/oauth.js';
import { SvcScopesYaml } from '@agent-credential-exchange/middleware/scopes-file';

/** Plain JSON Schema: drops TypeBox's symbol keys and `$id`s (components are named by their key). */
const plain = (schema: TSchema): Record<string, unknown> => JSON.parse(JSON.stringify(schema, (key, value) => (key === '$id' ? undefined : value)));

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const errorResponse = (description: string, headers?: Record<string, unknown>) => ({
  description,
  ...(headers ? { headers } : {}),
  content: { 'application/json': { schema: ref('Error') } },
});
const retryAfter = { 'Retry-After': { description: 'Seconds to wait (integer, at least 1).', schema: { type: 'integer', minimum: 1 } } };
// The public endpoints take no HTTP authentication (agents send their credentials in the JSON body);
// an explicit empty list says so to generators and linters. The admin API (bearer token) is on its own
// listener and is not part of this document (docs/admin-api.md).
const noHttpAuth: never[] = [];
const oauthError = (description: string, headers?: Record<string, unknown>) => ({
  description,
  ...(headers ? { headers } : {}),
  content: { 'application/json': { schema: ref('OAuthError') } },
});
const codes = (...names: (keyof typeof ERRORS)[]) => names.map((n) => `\`${n}\``).join(', ');

/** The profiles issued, as an enum for generators (the validator keeps a plain string: see schemas/public.ts). */
function withProfileEnum(schema: Record<string, any>): Record<string, unknown> {
  schema.properties.profile.enum = [...TOKEN_PROFILES];
  return schema;
}

export function buildOpenApiDocument(options: { apiKeyPrefix: string; serverUrl: string; version: string }) {
  const bodyErrors = {
    '400': errorResponse(
      `Body is not JSON (${codes('invalid_json')}), or its length is ambiguous (${codes('bad_request')}: more than one Content-Length, or chunked twice); the connection then closes.`,
    ),
    '413': errorResponse(`Body over ${MAX_BODY_BYTES / 1024} KiB (${codes('payload_too_large')}).`),
    '415': errorResponse(`Content-Type is not application/json (${codes('unsupported_media_type')}).`),
    '501': errorResponse(`Transfer-Encoding other than chunked (${codes('not_implemented')}); the connection then closes.`),
  };
  return {
    openapi: '3.1.0',
    info: {
      title: 'Agent Credential Exchange Service: public contract',
      version: options.version,
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
      description: `Agents trade api_key_id + secret + platform_id for a short-lived RS256 JWT (profile "${TOKEN_PROFILE}" by default, or "oauth-at-jwt": RFC 9068) whose aud is the platform.`,
    },
    servers: [{ url: options.serverUrl }],
    paths: {
      '/api/v1/auth/token': {
        post: {
          operationId: 'exchangeToken',
          security: noHttpAuth,
          summary: 'Exchange agent credentials for a token',
          requestBody: { required: true, content: { 'application/json': { schema: ref('TokenRequest') } } },
          responses: {
            '200': {
              description: 'Token issued.',
              headers: { 'Cache-Control': { schema: { type: 'string', const: 'no-store' } } },
              content: { 'application/json': { schema: ref('TokenResponse') } },
            },
            ...bodyErrors,
            '401': errorResponse(`Unknown api_key_id or wrong secret (${codes('invalid_credentials')}); identical for both.`),
            '403': errorResponse(`${codes('agent_inactive', 'platform_access_denied', 'invalid_scope')}.`),
            '422': errorResponse(`${codes('validation_error', 'unsupported_profile')}.`),
            '429': errorResponse(`${codes('rate_limited')}: per api_key_id, or failed authentications per address.`, retryAfter),
            '503': errorResponse(`${codes('service_unavailable')}.`, retryAfter),
          },
        },
      },
      '/oauth2/token': {
        post: {
          operationId: 'oauthClientCredentials',
          // RFC 6749 §2.3.1: Basic, or client_id + client_secret in the form (client_secret_post).
          security: [{ clientSecretBasic: [] }, {}],
          summary: 'OAuth 2.0 client credentials grant (RFC 6749 §4.4): the same exchange, profile oauth-at-jwt',
          description:
            'client_id is the api_key_id. The platform is named by resource (RFC 8707: https://<verified domain> or ' +
            'urn:uuid:<platform_id>) and/or audience (<platform_id>). scope is space-delimited; empty means every granted scope. ' +
            'Same secret check, limits, audit events and metrics as POST /api/v1/auth/token. Errors follow RFC 6749 §5.2 ' +
            '(error, error_description) and also carry detail and error_code (equal to error).',
          requestBody: { required: true, content: { 'application/x-www-form-urlencoded': { schema: ref('OAuthTokenRequest') } } },
          responses: {
            '200': {
              description: 'Token issued (RFC 6749 §5.1): an RFC 9068 JWT access token (header typ at+jwt).',
              headers: { 'Cache-Control': { schema: { type: 'string', const: 'no-store' } } },
              content: { 'application/json': { schema: ref('OAuthTokenResponse') } },
            },
            '400': oauthError('invalid_request (not a form, a parameter twice, two authentication methods, grant_type missing), unsupported_grant_type, invalid_scope, invalid_target (RFC 8707: no platform named, unknown, or not granted), unauthorized_client (the agent is inactive).'),
            '401': oauthError('invalid_client: unknown client_id, wrong secret or no client authentication; WWW-Authenticate: Basic when Basic was used.', {
              'WWW-Authenticate': { schema: { type: 'string' } },
            }),
            '413': errorResponse(`Body over ${MAX_BODY_BYTES / 1024} KiB (${codes('payload_too_large')}).`),
            '429': oauthError('rate_limited: the per-api_key_id token limit (shared with /api/v1/auth/token), or failed authentications per address.', retryAfter),
            '503': oauthError('temporarily_unavailable.', retryAfter),
          },
        },
      },
      '/.well-known/oauth-authorization-server': {
        get: {
          operationId: 'getAuthorizationServerMetadata',
          security: noHttpAuth,
          summary: 'OAuth 2.0 authorization server metadata (RFC 8414); issuer is the tokens\' iss',
          responses: {
            '200': { description: 'The metadata document.', content: { 'application/json': { schema: ref('AuthorizationServerMetadata') } } },
          },
        },
      },
      '/api/v1/auth/agents/me/platforms': {
        post: {
          operationId: 'listAgentPlatforms',
          security: noHttpAuth,
          summary: "List the calling agent's platforms (client bootstrap)",
          requestBody: { required: true, content: { 'application/json': { schema: ref('AgentCredentials') } } },
          responses: {
            '200': { description: 'Platform listing.', content: { 'application/json': { schema: ref('PlatformListing') } } },
            ...bodyErrors,
            '401': errorResponse(`${codes('invalid_credentials')}.`),
            '403': errorResponse(`${codes('agent_inactive')}.`),
            '422': errorResponse(`${codes('validation_error')}.`),
            '429': errorResponse(`${codes('rate_limited')}.`, retryAfter),
            '503': errorResponse(`${codes('service_unavailable')}.`, retryAfter),
          },
        },
      },
      '/.well-known/jwks.json': {
        get: {
          operationId: 'getJwks',
          security: noHttpAuth,
          summary: 'Public signing keys',
          responses: {
            '200': {
              description: 'Key set: the active key first, then published keys that are not active.',
              headers: {
                'Cache-Control': { schema: { type: 'string', const: 'public, max-age=3600' } },
                ETag: { schema: { type: 'string' } },
              },
              content: { 'application/json': { schema: ref('KeySet') } },
            },
            '304': { description: 'Not modified (If-None-Match matched the ETag).' },
          },
        },
      },
      '/api/v1/platforms/{platform_id}/scopes.yaml': {
        get: {
          operationId: 'getScopeFile',
          security: noHttpAuth,
          summary: 'Scope file of a platform (SvcScopesYaml v1)',
          parameters: [{ name: 'platform_id', in: 'path', required: true, schema: { type: 'string', format: 'uuid' } }],
          responses: {
            '200': {
              description: 'The scope file.',
              headers: { ETag: { schema: { type: 'string' } } },
              content: { 'text/yaml': { schema: ref('SvcScopesYaml') } },
            },
            '304': { description: 'Not modified.' },
            '404': errorResponse(`${codes('not_found')}.`),
            '422': errorResponse(`${codes('validation_error')}: platform_id is not a UUID.`),
          },
        },
      },
      '/api/v1/platforms/{platform_id}/revocations': {
        get: {
          operationId: 'getRevocationFeed',
          security: noHttpAuth,
          summary: "Signed revocation feed of a platform (for polling and catching up; public like the JWKS)",
          description:
            'A compact JWS (RS256, header typ "ace-revocations+jwt", kid of the service key that signed it: verify it with ' +
            'the JWKS). Payload: iss, platform_id, since, seq (the platform\'s head sequence), iat, and entries, each ' +
            '{seq, type, expires_at} plus agent_id and iat_max (type "agent": the agent\'s tokens for this platform with ' +
            'iat <= iat_max are void), iat_max (type "platform": every token for the platform with iat <= iat_max is void) ' +
            'or kid (type "key": every token signed with kid is void). Every live entry with a sequence above since is ' +
            'included; resume with since=seq. A verifier must refuse a document whose seq or iat is lower than one it ' +
            'already applied. The same documents are pushed over the WebSocket at ./revocations/ws?since=<seq>.',
          parameters: [
            { name: 'platform_id', in: 'path', required: true, schema: { type: 'string', format: 'uuid' } },
            { name: 'since', in: 'query', required: false, schema: { type: 'integer', minimum: 0, default: 0 } },
          ],
          responses: {
            '200': {
              description: 'The signed document.',
              headers: {
                'Cache-Control': { schema: { type: 'string', const: 'public, max-age=2' } },
                ETag: { schema: { type: 'string' } },
              },
              content: { 'application/jwt': { schema: { type: 'string' } } },
            },
            '304': { description: 'Not modified.' },
            '404': errorResponse(`${codes('not_found')}.`),
            '422': errorResponse(`${codes('validation_error')}: platform_id is not a UUID, or since is not a non-negative integer.`),
            '503': errorResponse(`${codes('service_unavailable')}.`, retryAfter),
          },
        },
      },
      '/api/v1/platforms/{platform_id}/revocations/ws': {
        get: {
          operationId: 'subscribeRevocationFeed',
          security: noHttpAuth,
          summary: 'WebSocket push of the revocation feed',
          description:
            'Upgrade to a WebSocket. The first message is the signed document from since (the catch-up); every later ' +
            'change of the platform\'s feed arrives as a further signed document, and {"type":"heartbeat"} every ' +
            'REVOCATION_HEARTBEAT_SECONDS. The subscriber sends nothing.',
          parameters: [
            { name: 'platform_id', in: 'path', required: true, schema: { type: 'string', format: 'uuid' } },
            { name: 'since', in: 'query', required: false, schema: { type: 'integer', minimum: 0, default: 0 } },
          ],
          responses: {
            '101': { description: 'Switching protocols: subscribed.' },
            '404': errorResponse(`${codes('not_found')}.`),
            '422': errorResponse(`${codes('validation_error')}.`),
          },
        },
      },
    },
    components: {
      schemas: {
        TokenRequest: withProfileEnum(plain(tokenRequestSchema(options.apiKeyPrefix))),
        AgentCredentials: plain(credentialsRequestSchema(options.apiKeyPrefix)),
        TokenResponse: plain(TokenResponse),
        Error: plain(ErrorBody),
        PlatformListing: plain(PlatformListing),
        KeySet: plain(KeySet),
        SvcScopesYaml: plain(SvcScopesYaml),
        OAuthTokenRequest: plain(OAuthTokenRequest),
        OAuthTokenResponse: plain(OAuthTokenResponse),
        OAuthError: plain(OAuthErrorBody),
        AuthorizationServerMetadata: plain(AuthorizationServerMetadata),
      },
      securitySchemes: {
        clientSecretBasic: { type: 'http', scheme: 'basic', description: 'RFC 6749 §2.3.1: form-urlencoded client_id (api_key_id) and secret.' },
      },
    },
  };
}
