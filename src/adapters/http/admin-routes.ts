// The internal admin API (docs/admin-api.md). Every /admin/v1/* request carries the admin bearer token,
// compared in constant time (admin-auth.ts), with a per-address budget of wrong tokens.
import { ServiceError } from '../../core/errors.js';
import { AgentCreate, AgentPatch, GrantPut, PlatformCreate, PlatformPatch, SecretRotate } from './schemas/admin.js';
import { UUID_PATTERN } from './schemas/public.js';
import { compileValidator } from './schemas/validate.js';
import type { AgentService } from '../../core/agents/agent-service.js';
import type { KeyManager } from '../../core/keys/key-manager.js';
import type { KeyStatus } from '../../core/keys/key-states.js';
import type { PlatformChange, PlatformDraft, PlatformService } from '../../core/platforms/platform-service.js';
import type { AgentRecord, GrantRecord, PlatformRecord } from '../../core/model.js';
import type { AdminAuthLimiter } from '../ratelimit/index.js';
import { adminTokenCheck } from './admin-auth.js';
import { ADMIN_ACTOR, auditEvents, type AuditSink, type ChangeBy } from '../../core/audit/events.js';
import { parseEventQuery, presentEvent, readEvents } from './audit-query.js';
import type { AuditStore } from '../../core/ports/audit-store.js';
import { parseJsonBody } from './json-body.js';
import { allowHeader, json, routesByPath, type Handler, type HttpRequest, type Route } from './types.js';

export interface AdminDeps {
  adminToken: string;
  authLimiter: Pick<AdminAuthLimiter, 'assertAllowed' | 'recordFailure'>;
  /** Metric and log of a wrong token (never the token itself). */
  onAuthFailure: (address: string) => void;
  platforms: PlatformService;
  agents: AgentService;
  keys: KeyManager;
  audit: AuditSink;
  auditStore: AuditStore;
}

const UUID = new RegExp(UUID_PATTERN);

/** The admin body's snake_case fields as the core's platform change (only the fields given). */
function toPlatformChange(body: PlatformPatch): PlatformChange {
  const { verification_status, ...rest } = body;
  return { ...rest, ...(verification_status !== undefined ? { verificationStatus: verification_status } : {}) };
}

export const presentPlatform = (p: PlatformRecord) => ({
  platform_id: p.id,
  name: p.name,
  domain: p.domain,
  status: p.status,
  verification_status: p.verificationStatus,
  scopes: p.scopes,
  routes: p.routes,
  created_at: p.createdAt,
  updated_at: p.updatedAt,
});

export const presentKey = (status: KeyStatus) => ({
  kid: status.row.kid,
  state: status.state,
  created_at: status.row.createdAt.toISOString(),
  activates_at: status.row.activatesAt.toISOString(),
  deactivated_at: status.deactivatedAt?.toISOString() ?? null,
  retires_at: status.retiresAt?.toISOString() ?? null,
  retired_at: status.row.retiredAt?.toISOString() ?? null,
});

export const presentAgent = (a: AgentRecord) => ({
  agent_id: a.id,
  name: a.name,
  status: a.status,
  api_key_id: a.apiKeyId,
  created_at: a.createdAt,
  updated_at: a.updatedAt,
});

const presentGrant = (g: GrantRecord) => ({ agent_id: g.agentId, platform_id: g.platformId, scopes: g.scopes, updated_at: g.updatedAt });

function uuidParam(request: HttpRequest, name: string): string {
  const value = request.params[name];
  if (!UUID.test(value)) throw new ServiceError('not_found', `No record with this ${name}.`);
  return value.toLowerCase();
}

export function adminRoutes(deps: AdminDeps): Route[] {
  const authorised = adminTokenCheck(deps.adminToken);
  const guard =
    (handler: Handler): Handler =>
    async (request) => {
      // A blocked address is refused before its token is looked at, so a lucky guess is not confirmed.
      await deps.authLimiter.assertAllowed(request.address);
      if (!authorised(request.headers.authorization)) {
        deps.onAuthFailure(request.address);
        deps.audit.emit(auditEvents.adminAuthFailed({ clientAddress: request.address, method: request.method, path: request.path }));
        await deps.authLimiter.recordFailure(request.address);
        throw new ServiceError('unauthorized', undefined, { 'WWW-Authenticate': 'Bearer realm="admin"' });
      }
      return handler(request);
    };
  // Who made a change, for its audit event, which the core writes in the change's own transaction: a
  // change is acknowledged only with its event, and a 503 means neither was written.
  const by = (r: HttpRequest, body?: object): ChangeBy => ({ actor: ADMIN_ACTOR, clientAddress: r.address, ...(body ? { fields: Object.keys(body) } : {}) });

  const platformCreate = compileValidator(PlatformCreate);
  const platformPatch = compileValidator(PlatformPatch);
  const agentCreate = compileValidator(AgentCreate);
  const agentPatch = compileValidator(AgentPatch);
  const grantPut = compileValidator(GrantPut);
  const secretRotate = compileValidator(SecretRotate);
  // An empty body on the rotate endpoints means "no options".
  const optionalBody = (request: HttpRequest) => (request.body && request.body.length > 0 ? parseJsonBody(request) : {});

  const routes: Route[] = [
    {
      method: 'POST', path: '/admin/v1/platforms', name: 'admin_platforms', body: true,
      handler: async (r) => {
        const body = platformCreate(parseJsonBody(r));
        const platform = await deps.platforms.create(toPlatformChange(body) as PlatformDraft, by(r, body));
        return json(201, presentPlatform(platform));
      },
    },
    {
      method: 'GET', path: '/admin/v1/platforms', name: 'admin_platforms',
      handler: async () => json(200, { platforms: (await deps.platforms.list()).map(presentPlatform) }),
    },
    {
      method: 'GET', path: '/admin/v1/platforms/:platform_id', name: 'admin_platform',
      handler: async (r) => json(200, presentPlatform(await deps.platforms.get(uuidParam(r, 'platform_id')))),
    },
    {
      method: 'PATCH', path: '/admin/v1/platforms/:platform_id', name: 'admin_platform', body: true,
      handler: async (r) => {
        const id = uuidParam(r, 'platform_id');
        const body = platformPatch(parseJsonBody(r));
        const platform = await deps.platforms.update(id, toPlatformChange(body), by(r, body));
        return json(200, presentPlatform(platform));
      },
    },
    {
      method: 'POST', path: '/admin/v1/agents', name: 'admin_agents', body: true,
      handler: async (r) => {
        const { agent, secret } = await deps.agents.create(agentCreate(parseJsonBody(r)).name, by(r));
        return json(201, { ...presentAgent(agent), secret }, { 'Cache-Control': 'no-store' });
      },
    },
    {
      method: 'GET', path: '/admin/v1/agents', name: 'admin_agents',
      handler: async () => json(200, { agents: (await deps.agents.list()).map(presentAgent) }),
    },
    {
      method: 'GET', path: '/admin/v1/agents/:agent_id', name: 'admin_agent',
      handler: async (r) => json(200, presentAgent(await deps.agents.get(uuidParam(r, 'agent_id')))),
    },
    {
      method: 'PATCH', path: '/admin/v1/agents/:agent_id', name: 'admin_agent', body: true,
      handler: async (r) => {
        const id = uuidParam(r, 'agent_id');
        const body = agentPatch(parseJsonBody(r));
        const agent = await deps.agents.update(id, body, by(r, body));
        return json(200, presentAgent(agent));
      },
    },
    {
      method: 'POST', path: '/admin/v1/agents/:agent_id/secret/rotate', name: 'admin_agent_secret_rotate', body: true,
      handler: async (r) => {
        const id = uuidParam(r, 'agent_id');
        const { grace_seconds } = secretRotate(optionalBody(r));
        const { apiKeyId, secret } = await deps.agents.rotateSecret(id, grace_seconds ?? 0, by(r));
        return json(200, { api_key_id: apiKeyId, secret }, { 'Cache-Control': 'no-store' });
      },
    },
    {
      method: 'GET', path: '/admin/v1/agents/:agent_id/grants', name: 'admin_agent_grants',
      handler: async (r) => json(200, { grants: (await deps.agents.listGrants(uuidParam(r, 'agent_id'))).map(presentGrant) }),
    },
    {
      method: 'PUT', path: '/admin/v1/agents/:agent_id/grants/:platform_id', name: 'admin_agent_grant', body: true,
      handler: async (r) => {
        const agentId = uuidParam(r, 'agent_id');
        const platformId = uuidParam(r, 'platform_id');
        const { scopes } = grantPut(parseJsonBody(r));
        const grant = await deps.agents.putGrant(agentId, platformId, scopes, by(r));
        return json(200, presentGrant(grant));
      },
    },
    {
      method: 'DELETE', path: '/admin/v1/agents/:agent_id/grants/:platform_id', name: 'admin_agent_grant',
      handler: async (r) => {
        const [agentId, platformId] = [uuidParam(r, 'agent_id'), uuidParam(r, 'platform_id')];
        await deps.agents.deleteGrant(agentId, platformId, by(r));
        return { status: 204 };
      },
    },
    {
      method: 'GET', path: '/admin/v1/keys', name: 'admin_keys',
      handler: () => json(200, { keys: deps.keys.list().map(presentKey) }),
    },
    {
      method: 'POST', path: '/admin/v1/keys/rotate', name: 'admin_keys_rotate', body: true,
      handler: async (r) => {
        const key = await deps.keys.rotate(by(r));
        return json(200, presentKey(key));
      },
    },
    {
      method: 'POST', path: '/admin/v1/keys/:kid/retire', name: 'admin_key_retire', body: true,
      handler: async (r) => {
        const key = await deps.keys.retire(r.params.kid, by(r));
        return json(200, presentKey(key));
      },
    },
    {
      method: 'GET', path: '/admin/v1/events', name: 'admin_events', query: true,
      handler: async (r) => {
        const page = await readEvents(deps.auditStore, parseEventQuery(r.query));
        return json(200, { events: page.events.map(presentEvent), next_cursor: page.nextCursor }, { 'Cache-Control': 'no-store' });
      },
    },
    {
      // Unknown admin paths answer 401 without the token, 404 with it: nothing is learned unauthenticated.
      method: 'ANY', path: '/admin/v1/*', name: 'admin_unmatched',
      handler: () => {
        throw new ServiceError('not_found');
      },
    },
  ];
  // A known path with another method: 405 with Allow, but only after the token check, so the API cannot
  // be mapped without the token. (First matching route wins, so these catch only the missing methods.)
  for (const [path, group] of routesByPath(routes.filter((r) => r.method !== 'ANY'))) {
    const allow = allowHeader(group);
    routes.push({
      method: 'ANY', path, name: group[0].name,
      handler: () => {
        throw new ServiceError('method_not_allowed', undefined, { Allow: allow });
      },
    });
  }
  return routes.map((route) => ({ ...route, handler: guard(route.handler) }));
}
