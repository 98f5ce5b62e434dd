// TypeBox schemas of the OAuth 2.0 door (oauth-routes.ts), for the OpenAPI document. The route reads the
// form itself (RFC 6749's rules: parameters once each, empty = absent), so these describe, not validate.
import { Type } from '@sinclair/typebox';

export const OAuthTokenRequest = Type.Object(
  {
    grant_type: Type.Union([Type.Literal('client_credentials'), Type.Literal('urn:ietf:params:oauth:grant-type:jwt-bearer')], {
      description: 'client_credentials, or the jwt-bearer grant (RFC 7523 §2.1, MCP workload identity federation): a trusted workload issuer\'s token as `assertion`, no client authentication.',
    }),
    assertion: Type.Optional(Type.String({ description: 'jwt-bearer grant: a token of a trusted workload issuer whose subject is bound to an agent (aud this service). Never logged.' })),
    client_id: Type.Optional(Type.String({ description: 'client_secret_post: the api_key_id (with Basic, optional and equal to it).' })),
    client_secret: Type.Optional(Type.String({ description: 'client_secret_post: the secret. Never logged.' })),
    client_assertion_type: Type.Optional(Type.Literal('urn:ietf:params:oauth:client-assertion-type:jwt-bearer', { description: 'RFC 7521 §4.2, with client_assertion.' })),
    client_assertion: Type.Optional(
      Type.String({
        description:
          'private_key_jwt (RFC 7523 §2.2): a JWT signed by one of the agent\'s keys, iss = sub = client_id, aud the token endpoint or the issuer, exp at most CLIENT_ASSERTION_MAX_LIFETIME_SECONDS ahead, a jti used once. Or a workload identity token of a trusted issuer whose subject is bound to the agent.',
      }),
    ),
    resource: Type.Optional(Type.String({ description: 'RFC 8707: https://<verified domain of the platform> or urn:uuid:<platform_id>.' })),
    audience: Type.Optional(Type.String({ format: 'uuid', description: 'The platform_id (when resource is not given, or naming the same platform).' })),
    scope: Type.Optional(Type.String({ description: 'Space-delimited scopes; absent or empty: every scope granted on the platform.' })),
  },
  { $id: 'OAuthTokenRequest' },
);

export const OAuthTokenResponse = Type.Object(
  {
    access_token: Type.String({ description: 'RS256 JWT, RFC 9068 (header typ at+jwt, svc_token_profile oauth-at-jwt).' }),
    token_type: Type.Literal('Bearer'),
    expires_in: Type.Integer({ examples: [900] }),
    scope: Type.String({ description: 'The granted scopes, space-delimited.' }),
  },
  { $id: 'OAuthTokenResponse', additionalProperties: false },
);

export const OAuthErrorBody = Type.Object(
  {
    error: Type.String({ description: 'RFC 6749 §5.2 / RFC 8707 code (plus rate_limited and temporarily_unavailable).' }),
    error_description: Type.String(),
    detail: Type.String({ description: 'The contract\'s Error shape: the same text.' }),
    error_code: Type.String({ description: 'The contract\'s Error shape: equal to error.' }),
  },
  { $id: 'OAuthError', additionalProperties: false },
);

export const AuthorizationServerMetadata = Type.Object(
  {
    issuer: Type.String({ description: 'Equal to the iss of every token (ISSUER).' }),
    authorization_endpoint: Type.String({
      description:
        'Served for clients whose metadata schema requires the member (the MCP SDK): it answers every request with the RFC 6749 §4.1.2.1 error unsupported_response_type, as no response type is supported.',
    }),
    token_endpoint: Type.String(),
    jwks_uri: Type.String(),
    grant_types_supported: Type.Array(Type.Union([Type.Literal('client_credentials'), Type.Literal('urn:ietf:params:oauth:grant-type:jwt-bearer')])),
    token_endpoint_auth_methods_supported: Type.Array(Type.String()),
    token_endpoint_auth_signing_alg_values_supported: Type.Array(Type.String()),
    response_types_supported: Type.Array(Type.String(), { maxItems: 0, description: 'No response type is supported (client credentials only): empty (the member is REQUIRED by RFC 8414).' }),
    service_documentation: Type.String(),
  },
  { $id: 'AuthorizationServerMetadata', additionalProperties: true },
);
