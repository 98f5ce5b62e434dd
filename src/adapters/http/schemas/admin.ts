// TypeBox schemas of the internal admin API (outside the stable contract).
import { Type, type Static } from '@sinclair/typebox';
import { AgentStatus, PlatformStatus, VerificationStatus } from './public.js';
import { RoutePath, ScopeName } from '@agent-credential-exchange/protocol/scopes-file';
import { UNSAFE_NAME_CHARACTERS } from '../../../support/unsafe-text.js';
import { CLIENT_AUTH_METHODS } from '../../../core/credentials/client-authentication.js';

/**
 * Every stored and echoed string (names, descriptions, URIs, issuer, audience, subject, JWK members) is shown in terminals (`ace agent list`), logs and consoles: none of the characters that would not
 * show as themselves (support/unsafe-text.ts: controls, bidirectional controls, zero-width characters,
 * line and paragraph separators).
 */
export const PRINTABLE_NAME = `^[^${UNSAFE_NAME_CHARACTERS}]*$`;
const Name = Type.String({ minLength: 1, maxLength: 200, pattern: PRINTABLE_NAME });
const Domain = Type.String({
  minLength: 1,
  maxLength: 253,
  pattern: '^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$',
  description: 'DNS host name of the platform.',
});

const Resource = Type.String({
  minLength: 1,
  maxLength: 2048,
  pattern: PRINTABLE_NAME,
  description:
    'Resource identifier (RFC 8707 / RFC 9728) a server of the platform answers as, e.g. an MCP server\'s URI https://api.example.com/mcp: ' +
    'absolute, https (http only on a loopback host: localhost, 127.0.0.0/8, [::1]), no fragment, no query, no user information. ' +
    'Stored normalised (scheme and host in lower case, no default port, no trailing slash); unique across platforms.',
});

export const AdminScopeInput = Type.Object(
  { name: ScopeName, description: Type.Optional(Type.String({ maxLength: 1024, pattern: PRINTABLE_NAME })) },
  { additionalProperties: false },
);
export const AdminRouteInput = Type.Object(
  {
    // Any case is accepted and normalised to upper case by the platform domain.
    method: Type.String({ pattern: '^[A-Za-z]{3,7}$', description: 'HTTP method (GET, POST, ...).' }),
    path: RoutePath,
    scopes: Type.Array(ScopeName),
  },
  { additionalProperties: false },
);

export const PlatformCreate = Type.Object(
  {
    name: Name,
    domain: Type.Optional(Type.Union([Domain, Type.Null()])),
    status: Type.Optional(PlatformStatus),
    verification_status: Type.Optional(VerificationStatus),
    scopes: Type.Array(AdminScopeInput, { maxItems: 1000 }),
    routes: Type.Optional(Type.Array(AdminRouteInput, { maxItems: 5000 })),
    resources: Type.Optional(Type.Array(Resource, { maxItems: 20 })),
  },
  { $id: 'PlatformCreate', additionalProperties: false },
);
export type PlatformCreate = Static<typeof PlatformCreate>;

export const PlatformPatch = Type.Partial(PlatformCreate, { $id: 'PlatformPatch', additionalProperties: false });
export type PlatformPatch = Static<typeof PlatformPatch>;

/** A public JWK (its members are checked by the service: kty, crv, size, no private members). */
const PublicJwkInput = Type.Object(
  { kty: Type.String({ maxLength: 8, pattern: PRINTABLE_NAME }), kid: Type.String({ minLength: 1, maxLength: 128, pattern: PRINTABLE_NAME }) },
  { additionalProperties: Type.Union([Type.String({ maxLength: 2048, pattern: PRINTABLE_NAME }), Type.Array(Type.String({ maxLength: 64, pattern: PRINTABLE_NAME }), { maxItems: 16 })]), description: 'A public JWK (RFC 7517) with a kid: EC P-256 (ES256), RSA >= 2048 bits (RS256, PS256) or OKP Ed25519 (EdDSA).' },
);
const JwkSetInput = Type.Object({ keys: Type.Array(PublicJwkInput, { maxItems: 10 }) }, { additionalProperties: false, description: 'An agent with no keys authenticates only through a workload binding (or keys added later).' });
/**
 * A workload issuer's keys: a JWK Set, or a SPIFFE trust bundle as SPIRE publishes it (`use` "jwt-svid" and
 * "x509-svid" keys, the latter with `x5c` and no kid; `spiffe_sequence`, `spiffe_refresh_hint`). Only the
 * keys for JWTs are kept (core/agents/spiffe-bundle.ts).
 */
const BundleJwkInput = Type.Object(
  {
    kty: Type.String({ maxLength: 8, pattern: PRINTABLE_NAME }),
    kid: Type.Optional(Type.String({ minLength: 1, maxLength: 128, pattern: PRINTABLE_NAME })),
    x5c: Type.Optional(Type.Array(Type.String({ maxLength: 16_384, pattern: '^[A-Za-z0-9+/=]*$' }), { maxItems: 8 })),
  },
  { additionalProperties: Type.Union([Type.String({ maxLength: 2048, pattern: PRINTABLE_NAME }), Type.Array(Type.String({ maxLength: 64, pattern: PRINTABLE_NAME }), { maxItems: 16 })]) },
);
const IssuerJwkSetInput = Type.Object(
  {
    keys: Type.Array(BundleJwkInput, { maxItems: 32 }),
    spiffe_sequence: Type.Optional(Type.Integer({ minimum: 0 })),
    spiffe_refresh_hint: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { additionalProperties: false, description: 'A JWK Set, or a SPIFFE bundle: its jwt-svid keys are kept (kid as published), x509-svid keys ignored.' },
);
const JwksUri = Type.String({ minLength: 1, maxLength: 2048, pattern: PRINTABLE_NAME, description: 'https URL of a JWK Set (http on loopback only with JWKS_URI_ALLOW_LOOPBACK).' });

/** RFC 7591 client metadata: without token_endpoint_auth_method the agent gets a secret (client_secret_basic). */
export const AgentCreate = Type.Object(
  {
    name: Name,
    token_endpoint_auth_method: Type.Optional(
      Type.Union([Type.Literal('client_secret_basic'), Type.Literal('client_secret_post'), Type.Literal('private_key_jwt')], {
        description: 'private_key_jwt: the agent authenticates with assertions signed by its keys (jwks or jwks_uri, one of them); no secret is made.',
      }),
    ),
    jwks: Type.Optional(JwkSetInput),
    jwks_uri: Type.Optional(JwksUri),
  },
  { $id: 'AgentCreate', additionalProperties: false },
);
export type AgentCreate = Static<typeof AgentCreate>;

export const AgentPatch = Type.Object(
  { name: Type.Optional(Name), status: Type.Optional(AgentStatus) },
  { $id: 'AgentPatch', additionalProperties: false },
);
export type AgentPatch = Static<typeof AgentPatch>;

export const GrantPut = Type.Object(
  { scopes: Type.Array(ScopeName, { maxItems: 1000 }) },
  { $id: 'GrantPut', additionalProperties: false },
);
export type GrantPut = Static<typeof GrantPut>;

export const SecretRotate = Type.Object(
  { grace_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 30 * 86_400 })) },
  { $id: 'SecretRotate', additionalProperties: false },
);
export type SecretRotate = Static<typeof SecretRotate>;

// --- answers (what the presenters in routes/admin/ produce) ---

const Timestamp = Type.String({ format: 'date-time' });
const Uuid = Type.String({ format: 'uuid' });

export const PlatformView = Type.Object(
  {
    platform_id: Uuid,
    name: Type.String(),
    domain: Type.Union([Type.String(), Type.Null()]),
    status: PlatformStatus,
    verification_status: VerificationStatus,
    scopes: Type.Array(Type.Object({ name: Type.String(), description: Type.String() })),
    routes: Type.Array(Type.Object({ method: Type.String(), path: Type.String(), scopes: Type.Array(Type.String()) })),
    resources: Type.Array(Type.String(), { description: 'The resource identifiers of the platform, normalised.' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Platform' },
);

export const AgentView = Type.Object(
  { agent_id: Uuid, name: Type.String(), status: AgentStatus, api_key_id: Type.String(), created_at: Timestamp, updated_at: Timestamp },
  { $id: 'Agent' },
);
export const AgentCreated = Type.Composite(
  [
    AgentView,
    Type.Object({
      token_endpoint_auth_method: Type.String(),
      secret: Type.Optional(Type.String({ description: 'Shown once; never stored in clear. Absent for private_key_jwt agents.' })),
    }),
  ],
  { $id: 'AgentCreated' },
);

export const ClientKeyAdd = Type.Composite([PublicJwkInput], { $id: 'ClientKeyAdd' });
export const ClientKeysView = Type.Object(
  {
    agent_id: Uuid,
    token_endpoint_auth_method: Type.Literal('private_key_jwt'),
    jwks: Type.Optional(Type.Object({ keys: Type.Array(Type.Record(Type.String(), Type.Unknown())) })),
    jwks_uri: Type.Optional(Type.String()),
  },
  { $id: 'ClientKeys' },
);
export const WorkloadIssuerCreate = Type.Object(
  {
    issuer: Type.String({ minLength: 1, maxLength: 512, pattern: PRINTABLE_NAME, description: 'The iss of the workload tokens, exactly.' }),
    audience: Type.String({ minLength: 1, maxLength: 512, pattern: PRINTABLE_NAME, description: 'The aud the issuer puts in tokens meant for this service (e.g. its issuer URL).' }),
    jwks: Type.Optional(IssuerJwkSetInput),
    jwks_uri: Type.Optional(JwksUri),
  },
  { $id: 'WorkloadIssuerCreate', additionalProperties: false },
);
export const WorkloadIssuerView = Type.Object(
  {
    issuer_id: Uuid,
    issuer: Type.String(),
    audience: Type.String(),
    jwks: Type.Optional(Type.Object({ keys: Type.Array(Type.Record(Type.String(), Type.Unknown())) })),
    jwks_uri: Type.Optional(Type.String()),
    created_at: Timestamp,
  },
  { $id: 'WorkloadIssuer' },
);
export const WorkloadIssuerList = Type.Object({ workload_issuers: Type.Array(WorkloadIssuerView) }, { $id: 'WorkloadIssuerList' });
export const WorkloadBindingCreate = Type.Object(
  { subject: Type.String({ minLength: 1, maxLength: 512, pattern: PRINTABLE_NAME, description: 'The sub of the workload tokens (e.g. system:serviceaccount:<ns>:<name>, spiffe://<trust domain>/<path>).' }), agent_id: Uuid },
  { $id: 'WorkloadBindingCreate', additionalProperties: false },
);
export const WorkloadBindingView = Type.Object({ issuer_id: Uuid, subject: Type.String(), agent_id: Uuid, created_at: Timestamp }, { $id: 'WorkloadBinding' });
export const WorkloadBindingList = Type.Object({ bindings: Type.Array(WorkloadBindingView) }, { $id: 'WorkloadBindingList' });
export const WorkloadBindingQuery = Type.Object({ subject: Type.String({ minLength: 1, maxLength: 512, pattern: PRINTABLE_NAME }) }, { additionalProperties: false });
export const SecretRotated = Type.Object(
  { api_key_id: Type.String(), secret: Type.String({ description: 'Shown once; never stored in clear.' }) },
  { $id: 'SecretRotated' },
);
export const GrantView = Type.Object({ agent_id: Uuid, platform_id: Uuid, scopes: Type.Array(Type.String()), updated_at: Timestamp }, { $id: 'Grant' });
export const KeyView = Type.Object(
  {
    kid: Type.String(),
    state: Type.Union([Type.Literal('next'), Type.Literal('active'), Type.Literal('retiring'), Type.Literal('retired')]),
    created_at: Timestamp,
    activates_at: Timestamp,
    deactivated_at: Type.Union([Timestamp, Type.Null()]),
    retires_at: Type.Union([Timestamp, Type.Null()]),
    retired_at: Type.Union([Timestamp, Type.Null()]),
  },
  { $id: 'SigningKey' },
);
export const FeedCredentialView = Type.Object(
  { feed_credential_id: Uuid, platform_id: Uuid, created_at: Timestamp },
  { $id: 'FeedCredential', description: 'A revocation feed credential, without its token (only its SHA-256 is stored).' },
);
export const FeedCredentialCreated = Type.Composite(
  [FeedCredentialView, Type.Object({ feed_token: Type.String({ description: 'Shown once; never stored in clear. Send it as Authorization: Bearer on the feed (docs/revocation.md).' }) })],
  { $id: 'FeedCredentialCreated' },
);
export const FeedCredentialList = Type.Object({ feed_credentials: Type.Array(FeedCredentialView) }, { $id: 'FeedCredentialList' });
export const PlatformList = Type.Object({ platforms: Type.Array(PlatformView) }, { $id: 'PlatformList' });
export const AgentList = Type.Object({ agents: Type.Array(AgentView) }, { $id: 'AgentList' });
export const GrantList = Type.Object({ grants: Type.Array(GrantView) }, { $id: 'GrantList' });
export const KeyList = Type.Object({ keys: Type.Array(KeyView) }, { $id: 'SigningKeyList' });
export const EventPage = Type.Object(
  {
    events: Type.Array(
      Type.Object(
        {
          id: Uuid,
          type: Type.String(),
          at: Timestamp,
          // How a token was obtained (token.issued, token.refused: docs/audit.md#how-a-token-was-obtained).
          auth_method: Type.Optional(
            Type.Union(CLIENT_AUTH_METHODS.map((m) => Type.Literal(m)), { description: 'token.issued, token.refused: how the client authenticated.' }),
          ),
          api_key_id: Type.Optional(Type.String({ maxLength: 128, description: 'token.refused: the api_key_id (client_id) presented, or a private_key_jwt assertion\'s iss.' })),
          client_kid: Type.Optional(Type.String({ maxLength: 128, description: 'private_key_jwt: the kid of the client key (agent.key_*: the key added or removed).' })),
          assertion_jti: Type.Optional(Type.String({ maxLength: 256, description: 'token.*: the client assertion\'s jti (jti is the issued token\'s).' })),
          issuer: Type.Optional(Type.String({ maxLength: 512, description: 'token.* by workload identity: the workload token\'s iss.' })),
          issuer_id: Type.Optional(Type.String({ maxLength: 128, description: 'The trusted workload issuer\'s id.' })),
          subject: Type.Optional(Type.String({ maxLength: 512, description: 'The workload subject (sub).' })),
        },
        {
          additionalProperties: true,
          description:
            'The event: its ids (agent_id, platform_id, kid, jti), actor, client_address and type-specific fields (docs/audit.md). Values a client claimed (token.refused) are cut to their maxLength and carry no control, bidirectional or invisible character (each became U+FFFD).',
        },
      ),
    ),
    next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as cursor for the next page; null on the last page.' }),
  },
  { $id: 'AuditEventPage' },
);
/** The query parameters GET /admin/v1/events accepts (parsed by audit-query.ts). */
export const EventQueryParams = Type.Object({
  type: Type.Optional(Type.String({ description: 'One or more event types separated by commas.' })),
  agent_id: Type.Optional(Uuid),
  platform_id: Type.Optional(Uuid),
  since: Type.Optional(Type.String({ description: 'ISO 8601 instant (inclusive).' })),
  until: Type.Optional(Type.String({ description: 'ISO 8601 instant (exclusive).' })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
  cursor: Type.Optional(Type.String({ description: 'next_cursor of the previous page.' })),
});
