// The internal admin API (docs/admin-api.md). Every /admin/v1/* route declares the admin bearer token
// (auth: 'admin_bearer'); the server runs adminBearerGuard before the handler: the token is compared in
// constant time (admin-auth.ts), with a per-address budget of wrong tokens.
// Each feature's routes are a file of their own beside this one; here the guard, and the API composed in
// the order the routes are declared and documented (docs/openapi-internal.json).
import { ServiceError } from '../../../../core/errors.js';
import type { AgentService } from '../../../../core/agents/agent-service.js';
import type { ClientKeyService } from '../../../../core/agents/client-key-service.js';
import type { KeyManager } from '../../../../core/keys/key-manager.js';
import type { PlatformService } from '../../../../core/platforms/platform-service.js';
import type { FeedCredentialService } from '../../../../core/revocation/feed-credential-service.js';
import type { AdminAuthLimiter } from '../../../ratelimit/index.js';
import { adminTokenCheck } from '../../admin-auth.js';
import { auditEvents, type AuditSink } from '../../../../core/audit/events.js';
import type { AuditStore } from '../../../../core/ports/audit-store.js';
import { refusals } from '../../responses.js';
import { HttpError } from '../../errors.js';
import { allowHeader, bindRoutes, refusalReply, routesByPath, type Guard, type Route, type RouteDeclaration } from '../../types.js';
import { admin, GUARD_REFUSALS } from './common.js';
import { platformHandlers, platformRouteTable } from './platforms.js';
import { feedCredentialHandlers, feedCredentialRouteTable } from './feed-credentials.js';
import { agentHandlers, agentRouteTable } from './agents.js';
import { grantHandlers, grantRouteTable } from './grants.js';
import { clientKeyHandlers, clientKeyRouteTable } from './client-keys.js';
import { workloadIdentityHandlers, workloadIdentityRouteTable } from './workload-identity.js';
import { signingKeyHandlers, signingKeyRouteTable } from './signing-keys.js';
import { eventHandlers, eventRouteTable } from './events.js';

export interface AdminGuardDeps {
  adminToken: string;
  authLimiter: Pick<AdminAuthLimiter, 'assertAllowed' | 'recordFailure'>;
  /** Metric and log of a wrong token (never the token itself). */
  onAuthFailure: (address: string) => void;
  audit: AuditSink;
}

export interface AdminDeps {
  platforms: PlatformService;
  agents: AgentService;
  clientKeys: ClientKeyService;
  keys: KeyManager;
  feedCredentials: FeedCredentialService;
  audit: AuditSink;
  auditStore: AuditStore;
}

/** The check of `auth: 'admin_bearer'` routes (HttpServerOptions.guards). */
export function adminBearerGuard(deps: AdminGuardDeps): Guard {
  const authorised = adminTokenCheck(deps.adminToken);
  return async (request) => {
    // A blocked address is refused before its token is looked at, so a lucky guess is not confirmed.
    await deps.authLimiter.assertAllowed(request.address);
    if (!authorised(request.headers.authorization)) {
      deps.onAuthFailure(request.address);
      deps.audit.emit(auditEvents.adminAuthFailed({ clientAddress: request.address, method: request.method, path: request.path }));
      await deps.authLimiter.recordFailure(request.address);
      throw new HttpError('unauthorized', undefined, { 'WWW-Authenticate': 'Bearer realm="admin"' });
    }
  };
}

/** The admin routes as data. */
export const adminRouteTable = {
  ...platformRouteTable,
  ...feedCredentialRouteTable,
  ...agentRouteTable,
  ...grantRouteTable,
  ...clientKeyRouteTable,
  ...workloadIdentityRouteTable,
  ...signingKeyRouteTable,
  ...eventRouteTable,
  // Unknown admin paths answer 401 without the token, 404 with it: nothing is learned unauthenticated.
  unmatched: {
    ...admin, method: 'ANY', path: '/admin/v1/*', name: 'admin_unmatched', summary: 'Any other admin path',
    responses: refusals({ ...GUARD_REFUSALS, not_found: '' }),
  },
} satisfies Record<string, RouteDeclaration>;

export function adminRoutes(deps: AdminDeps): Route[] {
  const routes = bindRoutes(adminRouteTable, {
    ...platformHandlers(deps),
    ...feedCredentialHandlers(deps),
    ...agentHandlers(deps),
    ...grantHandlers(deps),
    ...clientKeyHandlers(deps),
    ...workloadIdentityHandlers(deps),
    ...signingKeyHandlers(deps),
    ...eventHandlers(deps),
    unmatched: () => {
      throw new ServiceError('not_found');
    },
  });
  // A known path with another method: 405 with Allow, but only after the token check, so the API cannot
  // be mapped without the token. (First matching route wins, so these catch only the missing methods.)
  for (const [path, group] of routesByPath(routes.filter((r) => r.method !== 'ANY'))) {
    const allow = allowHeader(group);
    routes.push({
      ...admin, method: 'ANY', path, name: group[0].name, summary: 'Any other method',
      responses: refusals({ ...GUARD_REFUSALS, method_not_allowed: '' }),
      handler: () => refusalReply(new ServiceError('method_not_allowed'), { headers: { Allow: allow } }),
    });
  }
  return routes;
}
