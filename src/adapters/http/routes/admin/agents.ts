// Admin API, agents: create (a secret shown once, or private_key_jwt keys), list, read, change, rotate the secret.
import { ServiceError } from '../../../../core/errors.js';
import { AgentCreate, AgentCreated, AgentList, AgentPatch, AgentView, SecretRotate, SecretRotated } from '../../schemas/admin.js';
import { compileValidator } from '../../schemas/validate.js';
import type { AgentService } from '../../../../core/agents/agent-service.js';
import type { ClientKeyService } from '../../../../core/agents/client-key-service.js';
import type { AgentRecord } from '../../../../core/model.js';
import { parseJsonBody } from '../../json-body.js';
import { JSON_BODY_REFUSALS, refusals } from '../../responses.js';
import { json, type Handler, type RouteDeclaration } from '../../types.js';
import { admin, AGENT_ID, by, change, GUARD_REFUSALS, jsonBody, NO_STORE, ok, optionalBody, uuidParam } from './common.js';
import { keySource } from './client-keys.js';

export const presentAgent = (a: AgentRecord) => ({
  agent_id: a.id,
  name: a.name,
  status: a.status,
  api_key_id: a.apiKeyId,
  created_at: a.createdAt,
  updated_at: a.updatedAt,
});

export const agentRouteTable = {
  agentCreate: {
    ...admin, method: 'POST', path: '/admin/v1/agents', name: 'admin_agents', operationId: 'adminCreateAgent',
    summary: 'Create an agent (its secret is shown once)', body: jsonBody(AgentCreate), audit: change('agent.created'),
    responses: { 201: { ...ok('Created.', AgentCreated), headers: NO_STORE }, ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, validation_error: '', conflict: 'a private_key_jwt agent while instances of an older release are still connected (agents without secrets wait for the rollout).' }) },
  },
  agentList: {
    ...admin, method: 'GET', path: '/admin/v1/agents', name: 'admin_agents', operationId: 'adminListAgents',
    summary: 'List agents', responses: { 200: ok('Every agent.', AgentList), ...refusals(GUARD_REFUSALS) },
  },
  agentGet: {
    ...admin, method: 'GET', path: '/admin/v1/agents/:agent_id', name: 'admin_agent', operationId: 'adminGetAgent',
    summary: 'Read an agent', params: AGENT_ID,
    responses: { 200: ok('The agent.', AgentView), ...refusals({ ...GUARD_REFUSALS, not_found: '' }) },
  },
  agentPatch: {
    ...admin, method: 'PATCH', path: '/admin/v1/agents/:agent_id', name: 'admin_agent', operationId: 'adminUpdateAgent',
    summary: 'Rename, deactivate or reactivate an agent', params: AGENT_ID, body: jsonBody(AgentPatch), audit: change('agent.updated'),
    responses: { 200: ok('The changed agent.', AgentView), ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, not_found: '', validation_error: '' }) },
  },
  secretRotate: {
    ...admin, method: 'POST', path: '/admin/v1/agents/:agent_id/secret/rotate', name: 'admin_agent_secret_rotate', operationId: 'adminRotateAgentSecret',
    summary: "Rotate an agent's secret (the old one may stay valid for grace_seconds)", params: AGENT_ID,
    // An empty body means "no options".
    body: jsonBody(SecretRotate, false), audit: change('agent.secret_rotated'),
    responses: { 200: { ...ok('The new secret.', SecretRotated), headers: NO_STORE }, ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, not_found: '', validation_error: '' }) },
  },
} satisfies Record<string, RouteDeclaration>;

export function agentHandlers(deps: { agents: AgentService; clientKeys: ClientKeyService }): Record<keyof typeof agentRouteTable, Handler> {
  const agentCreate = compileValidator(agentRouteTable.agentCreate.body.schema);
  const agentPatch = compileValidator(agentRouteTable.agentPatch.body.schema);
  const secretRotate = compileValidator(agentRouteTable.secretRotate.body.schema);
  return {
    agentCreate: async (r) => {
      const body = agentCreate(parseJsonBody(r));
      if (body.token_endpoint_auth_method === 'private_key_jwt') {
        const agent = await deps.clientKeys.createKeyAgent(body.name, keySource(body), by(r, body));
        return json(201, { ...presentAgent(agent), token_endpoint_auth_method: 'private_key_jwt' }, { 'Cache-Control': 'no-store' });
      }
      if (body.jwks !== undefined || body.jwks_uri !== undefined) throw new ServiceError('validation_error', 'jwks and jwks_uri go with token_endpoint_auth_method private_key_jwt.');
      const { agent, secret } = await deps.agents.create(body.name, by(r));
      return json(201, { ...presentAgent(agent), token_endpoint_auth_method: body.token_endpoint_auth_method ?? 'client_secret_basic', secret }, { 'Cache-Control': 'no-store' });
    },
    agentList: async () => json(200, { agents: (await deps.agents.list()).map(presentAgent) }),
    agentGet: async (r) => json(200, presentAgent(await deps.agents.get(uuidParam(r, 'agent_id')))),
    agentPatch: async (r) => {
      const id = uuidParam(r, 'agent_id');
      const body = agentPatch(parseJsonBody(r));
      const agent = await deps.agents.update(id, body, by(r, body));
      return json(200, presentAgent(agent));
    },
    secretRotate: async (r) => {
      const id = uuidParam(r, 'agent_id');
      const { grace_seconds } = secretRotate(optionalBody(r));
      const { apiKeyId, secret } = await deps.agents.rotateSecret(id, grace_seconds ?? 0, by(r));
      return json(200, { api_key_id: apiKeyId, secret }, { 'Cache-Control': 'no-store' });
    },
  };
}
