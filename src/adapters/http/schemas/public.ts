// TypeBox schemas of the public contract (v1). The service validates with these (compiled once by Ajv)
// and the OpenAPI document is generated from them.
import { Type, type Static } from '@sinclair/typebox';

import { TOKEN_PROFILE, TOKEN_PROFILES } from '../../../core/tokens/token-service.js';

export { TOKEN_PROFILE, TOKEN_PROFILES };
export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';

/** `api_key_id`: the deployment's 9-character prefix followed by 32 lowercase hex characters. */
export function apiKeyIdSchema(prefix: string) {
  const escaped = prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return Type.String({
    pattern: `^${escaped}[0-9a-f]{32}$`,
    description: `Public agent identifier: "${prefix}" followed by 32 lowercase hexadecimal characters (41 in all).`,
    examples: [`${prefix}${'0123456789abcdef'.repeat(2)}`],
  });
}

export const Secret = Type.String({ minLength: 1, maxLength: 1024, description: 'Agent secret. Never logged.' });
export const PlatformId = Type.String({ format: 'uuid', description: 'UUID of the platform.' });

export function tokenRequestSchema(prefix: string) {
  return Type.Object(
    {
      api_key_id: apiKeyIdSchema(prefix),
      secret: Secret,
      platform_id: PlatformId,
      scopes: Type.Optional(
        Type.Array(Type.String(), {
          default: [],
          description: 'Requested scope subset; empty or omitted means every scope the agent is granted on the platform.',
        }),
      ),
      // A plain string for the validator: an unknown profile is refused as unsupported_profile (the
      // contract's code), not as a validation_error. The OpenAPI document adds the enum.
      profile: Type.Optional(
        Type.String({
          default: TOKEN_PROFILE,
          description: `Token profile: "${TOKEN_PROFILE}" (default, header typ JWT) or "oauth-at-jwt" (RFC 9068, header typ at+jwt); any other value is refused with 422 unsupported_profile.`,
        }),
      ),
    },
    { $id: 'TokenRequest', additionalProperties: true },
  );
}
export type TokenRequest = Static<ReturnType<typeof tokenRequestSchema>>;

export function credentialsRequestSchema(prefix: string) {
  return Type.Object(
    { api_key_id: apiKeyIdSchema(prefix), secret: Secret },
    { $id: 'AgentCredentials', additionalProperties: true },
  );
}

export const TokenResponse = Type.Object(
  {
    access_token: Type.String({ description: 'RS256 JWT.' }),
    token_type: Type.Literal('Bearer'),
    expires_in: Type.Integer({ description: 'Lifetime in seconds.', examples: [900] }),
  },
  { $id: 'TokenResponse' },
);

export const ErrorBody = Type.Object(
  {
    detail: Type.String({ description: 'Human-readable message.' }),
    error_code: Type.Optional(Type.String({ description: 'Machine-readable code.' })),
  },
  { $id: 'Error', additionalProperties: false },
);

export const PlatformStatus = Type.Union([Type.Literal('active'), Type.Literal('suspended'), Type.Literal('disabled')]);
export const VerificationStatus = Type.Union([Type.Literal('pending'), Type.Literal('verified'), Type.Literal('failed')]);
export const AgentStatus = Type.Union([Type.Literal('active'), Type.Literal('inactive')]);

export const PlatformEntry = Type.Object(
  {
    platform_id: Type.String({ format: 'uuid' }),
    granted_scopes: Type.Array(Type.String()),
    status: PlatformStatus,
    name: Type.Optional(Type.String({ description: 'Best-effort enrichment.' })),
    hostname: Type.Union([Type.String(), Type.Null()], { description: 'Verified domain, else null. Best-effort.' }),
    verification_status: Type.Optional(VerificationStatus),
  },
  { $id: 'PlatformEntry' },
);

export const PlatformListing = Type.Object(
  { agent_id: Type.String({ format: 'uuid' }), platforms: Type.Array(PlatformEntry) },
  { $id: 'PlatformListing' },
);
export type PlatformEntry = Static<typeof PlatformEntry>;
export type PlatformListing = Static<typeof PlatformListing>;

export const Jwk = Type.Object(
  {
    kty: Type.Literal('RSA'),
    use: Type.Literal('sig'),
    alg: Type.Literal('RS256'),
    kid: Type.String(),
    n: Type.String(),
    e: Type.String(),
  },
  { $id: 'Jwk', additionalProperties: false },
);
export const KeySet = Type.Object({ keys: Type.Array(Jwk) }, { $id: 'KeySet', additionalProperties: false });
