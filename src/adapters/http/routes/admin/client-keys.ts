// Admin API, a private_key_jwt agent's public keys (list, add, remove), and the key source of RFC 7591
// metadata (`jwks` or `jwks_uri`) the agent and workload issuer routes read and show too.
import { Type } from '@sinclair/typebox';
import { ServiceError } from '../../../../core/errors.js';
import { ClientKeyAdd, ClientKeysView } from '../../schemas/admin.js';
import { compileValidator } from '../../schemas/validate.js';
import type { ClientKeyService } from '../../../../core/agents/client-key-service.js';
import type { KeySource, PublicJwk } from '../../../../core/ports/client-keys.js';
import { parseJsonBody } from '../../json-body.js';
import { JSON_BODY_REFUSALS, refusals } from '../../responses.js';
import { json, type Handler, type RouteDeclaration } from '../../types.js';
import { admin, AGENT_ID, by, change, GUARD_REFUSALS, jsonBody, ok, uuidParam } from './common.js';

/** A key source as RFC 7591 metadata: `jwks` or `jwks_uri`. */
export const presentKeySource = (source: KeySource) => (source.jwksUri !== undefined ? { jwks_uri: source.jwksUri } : { jwks: { keys: source.keys } });

/** `jwks` or `jwks_uri`, exactly one. */
export function keySource(body: { jwks?: { keys: unknown[] }; jwks_uri?: string }): KeySource {
  if ((body.jwks === undefined) === (body.jwks_uri === undefined)) throw new ServiceError('validation_error', 'Give exactly one of jwks and jwks_uri.');
  return body.jwks_uri !== undefined ? { jwksUri: body.jwks_uri } : { keys: body.jwks!.keys as PublicJwk[] };
}

export const clientKeyRouteTable = {
  clientKeyList: {
    ...admin, method: 'GET', path: '/admin/v1/agents/:agent_id/keys', name: 'admin_agent_keys', operationId: 'adminListAgentKeys',
    summary: "A private_key_jwt agent's public keys (jwks) or its jwks_uri", params: AGENT_ID,
    responses: { 200: ok('Its keys.', ClientKeysView), ...refusals({ ...GUARD_REFUSALS, not_found: '', conflict: 'the agent authenticates with a secret.' }) },
  },
  clientKeyAdd: {
    ...admin, method: 'POST', path: '/admin/v1/agents/:agent_id/keys', name: 'admin_agent_keys', operationId: 'adminAddAgentKey',
    summary: 'Add a public key to a private_key_jwt agent (several live keys: rotation with overlap)', params: AGENT_ID, body: jsonBody(ClientKeyAdd), audit: change('agent.key_added'),
    responses: { 201: ok('Its keys now.', ClientKeysView), ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, not_found: '', validation_error: '', conflict: 'a key with this kid exists, 10 keys already, the agent uses a secret or a jwks_uri, or instances of an older release are still connected (agents without secrets wait for the rollout).' }) },
  },
  clientKeyRemove: {
    ...admin, method: 'DELETE', path: '/admin/v1/agents/:agent_id/keys/:kid', name: 'admin_agent_key', operationId: 'adminRemoveAgentKey',
    summary: "Remove an agent's key: assertions it signs are refused, and the agent's tokens are taken back (revocation feed)", params: { ...AGENT_ID, kid: Type.String() }, audit: change('agent.key_removed'),
    responses: { 204: { description: 'Removed.' }, ...refusals({ ...GUARD_REFUSALS, not_found: '', conflict: 'the agent authenticates with a secret.' }) },
  },
} satisfies Record<string, RouteDeclaration>;

export function clientKeyHandlers(deps: { clientKeys: ClientKeyService }): Record<keyof typeof clientKeyRouteTable, Handler> {
  const clientKeyAdd = compileValidator(clientKeyRouteTable.clientKeyAdd.body.schema);
  return {
    clientKeyList: async (r) => {
      const id = uuidParam(r, 'agent_id');
      const source = await deps.clientKeys.keysOf(id);
      if (!source) throw new ServiceError('conflict', 'This agent authenticates with a secret, not with keys.');
      return json(200, { agent_id: id, token_endpoint_auth_method: 'private_key_jwt', ...presentKeySource(source) });
    },
    clientKeyAdd: async (r) => {
      const id = uuidParam(r, 'agent_id');
      const source = await deps.clientKeys.addKey(id, clientKeyAdd(parseJsonBody(r)), by(r));
      return json(201, { agent_id: id, token_endpoint_auth_method: 'private_key_jwt', ...presentKeySource(source) });
    },
    clientKeyRemove: async (r) => {
      await deps.clientKeys.removeKey(uuidParam(r, 'agent_id'), r.params.kid, by(r));
      return { status: 204 };
    },
  };
}
