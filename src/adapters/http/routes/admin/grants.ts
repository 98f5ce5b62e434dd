// Admin API, grants: the scopes of a platform an agent holds (list, put, delete).
import { GrantList, GrantPut, GrantView } from '../../schemas/admin.js';
import { compileValidator } from '../../schemas/validate.js';
import type { AgentService } from '../../../../core/agents/agent-service.js';
import type { GrantRecord } from '../../../../core/model.js';
import { parseJsonBody } from '../../json-body.js';
import { JSON_BODY_REFUSALS, refusals } from '../../responses.js';
import { json, type Handler, type RouteDeclaration } from '../../types.js';
import { admin, AGENT_ID, by, change, GUARD_REFUSALS, jsonBody, ok, PLATFORM_ID, uuidParam } from './common.js';

const presentGrant = (g: GrantRecord) => ({ agent_id: g.agentId, platform_id: g.platformId, scopes: g.scopes, updated_at: g.updatedAt });

export const grantRouteTable = {
  grantList: {
    ...admin, method: 'GET', path: '/admin/v1/agents/:agent_id/grants', name: 'admin_agent_grants', operationId: 'adminListGrants',
    summary: "List an agent's grants", params: AGENT_ID,
    responses: { 200: ok('Its grants.', GrantList), ...refusals({ ...GUARD_REFUSALS, not_found: '' }) },
  },
  grantPut: {
    ...admin, method: 'PUT', path: '/admin/v1/agents/:agent_id/grants/:platform_id', name: 'admin_agent_grant', operationId: 'adminPutGrant',
    summary: 'Grant scopes of a platform to an agent (replaces the grant)', params: { ...AGENT_ID, ...PLATFORM_ID }, body: jsonBody(GrantPut), audit: change('grant.put'),
    responses: { 200: ok('The grant.', GrantView), ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, not_found: '', validation_error: '' }) },
  },
  grantDelete: {
    ...admin, method: 'DELETE', path: '/admin/v1/agents/:agent_id/grants/:platform_id', name: 'admin_agent_grant', operationId: 'adminDeleteGrant',
    summary: 'Take a grant back', params: { ...AGENT_ID, ...PLATFORM_ID }, audit: change('grant.deleted'),
    responses: { 204: { description: 'Deleted.' }, ...refusals({ ...GUARD_REFUSALS, not_found: '' }) },
  },
} satisfies Record<string, RouteDeclaration>;

export function grantHandlers(deps: { agents: AgentService }): Record<keyof typeof grantRouteTable, Handler> {
  const grantPut = compileValidator(grantRouteTable.grantPut.body.schema);
  return {
    grantList: async (r) => json(200, { grants: (await deps.agents.listGrants(uuidParam(r, 'agent_id'))).map(presentGrant) }),
    grantPut: async (r) => {
      const agentId = uuidParam(r, 'agent_id');
      const platformId = uuidParam(r, 'platform_id');
      const { scopes } = grantPut(parseJsonBody(r));
      const grant = await deps.agents.putGrant(agentId, platformId, scopes, by(r));
      return json(200, presentGrant(grant));
    },
    grantDelete: async (r) => {
      const [agentId, platformId] = [uuidParam(r, 'agent_id'), uuidParam(r, 'platform_id')];
      await deps.agents.deleteGrant(agentId, platformId, by(r));
      return { status: 204 };
    },
  };
}
