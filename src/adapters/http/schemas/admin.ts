// TypeBox schemas of the internal admin API (outside the stable contract).
import { Type, type Static } from '@sinclair/typebox';
import { AgentStatus, PlatformStatus, VerificationStatus } from './public.js';
import { RoutePath, ScopeName } from '@agent-credential-exchange/middleware/scopes-file';

/**
 * Names are shown in terminals (`ace agent list`) and logs: no C0 or C1 control character, no DEL, so a
 * name cannot carry a terminal escape sequence or a line break (issue #23).
 */
export const NO_CONTROL_CHARACTERS = '^[^\\u0000-\\u001F\\u007F-\\u009F]*$';
const Name = Type.String({ minLength: 1, maxLength: 200, pattern: NO_CONTROL_CHARACTERS });
const Domain = Type.String({
  minLength: 1,
  maxLength: 253,
  pattern: '^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$',
  description: 'DNS host name of the platform.',
});

export const AdminScopeInput = Type.Object(
  { name: ScopeName, description: Type.Optional(Type.String({ maxLength: 1024 })) },
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
  },
  { $id: 'PlatformCreate', additionalProperties: false },
);
export type PlatformCreate = Static<typeof PlatformCreate>;

export const PlatformPatch = Type.Partial(PlatformCreate, { $id: 'PlatformPatch', additionalProperties: false });
export type PlatformPatch = Static<typeof PlatformPatch>;

export const AgentCreate = Type.Object({ name: Name }, { $id: 'AgentCreate', additionalProperties: false });
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
