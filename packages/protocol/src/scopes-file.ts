// SvcScopesYaml version 1: the per-platform scope file that platform middleware reads at start-up.
import { Type, type Static } from '@sinclair/typebox';

export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

export const ScopeName = Type.String({
  minLength: 1,
  maxLength: 128,
  pattern: '^[A-Za-z0-9_.:/\\-]+$',
  description: 'Scope name, e.g. "orders:read".',
});

export const HttpMethod = Type.Union(HTTP_METHODS.map((m) => Type.Literal(m)));

/** Path template: literal segments and `{param}` segments, e.g. `/orders/{id}`. */
export const RoutePath = Type.String({
  minLength: 1,
  maxLength: 1024,
  pattern: '^/([A-Za-z0-9._~!$&\'()*+,;=:@%-]+|\\{[A-Za-z_][A-Za-z0-9_]*\\}|/)*$',
  description: 'Path template such as /orders/{id}.',
});

export const ScopeDefinition = Type.Object(
  { name: ScopeName, description: Type.String({ maxLength: 1024 }) },
  { additionalProperties: false },
);

export const RouteRule = Type.Object(
  { method: HttpMethod, path: RoutePath, scopes: Type.Array(ScopeName) },
  { additionalProperties: false },
);

export const SvcScopesYaml = Type.Object(
  {
    schema: Type.Literal('SvcScopesYaml'),
    version: Type.Literal(1),
    platform_id: Type.String({ format: 'uuid' }),
    scopes: Type.Array(ScopeDefinition),
    routes: Type.Array(RouteRule),
    resources: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), {
        maxItems: 21,
        description:
          'The resource identifiers (RFC 8707) the service issues tokens for on this platform besides urn:uuid:<platform_id>: ' +
          'its registered resources and https://<verified domain>. The middleware checks its `resource` option against them.',
      }),
    ),
  },
  { $id: 'SvcScopesYaml', additionalProperties: false, description: 'Scope file of a platform, version 1.' },
);
export type SvcScopesYaml = Static<typeof SvcScopesYaml>;
