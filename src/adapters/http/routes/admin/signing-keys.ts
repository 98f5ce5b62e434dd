// Admin API, the service's signing keys: list, rotate, retire.
import { Type } from '@sinclair/typebox';
import { KeyList, KeyView } from '../../schemas/admin.js';
import type { KeyManager } from '../../../../core/keys/key-manager.js';
import type { KeyStatus } from '../../../../core/keys/key-states.js';
import { refusals } from '../../responses.js';
import { json, type Handler, type RouteDeclaration } from '../../types.js';
import { admin, by, change, GUARD_REFUSALS, jsonBody, ok } from './common.js';

export const presentKey = (status: KeyStatus) => ({
  kid: status.row.kid,
  state: status.state,
  created_at: status.row.createdAt.toISOString(),
  activates_at: status.row.activatesAt.toISOString(),
  deactivated_at: status.deactivatedAt?.toISOString() ?? null,
  retires_at: status.retiresAt?.toISOString() ?? null,
  retired_at: status.row.retiredAt?.toISOString() ?? null,
});

export const signingKeyRouteTable = {
  keyList: {
    ...admin, method: 'GET', path: '/admin/v1/keys', name: 'admin_keys', operationId: 'adminListKeys',
    summary: 'List signing keys and their states', responses: { 200: ok('Every key.', KeyList), ...refusals(GUARD_REFUSALS) },
  },
  keyRotate: {
    ...admin, method: 'POST', path: '/admin/v1/keys/rotate', name: 'admin_keys_rotate', operationId: 'adminRotateKey',
    // The body, if any, is not read.
    summary: 'Create the next signing key', body: jsonBody(Type.Object({}), false), audit: change('key.rotated'),
    responses: { 200: ok('The new key.', KeyView), ...refusals({ ...GUARD_REFUSALS, conflict: '' }) },
  },
  keyRetire: {
    ...admin, method: 'POST', path: '/admin/v1/keys/:kid/retire', name: 'admin_key_retire', operationId: 'adminRetireKey',
    summary: 'Retire a signing key now (tokens it signed stop verifying)', params: { kid: Type.String() },
    body: jsonBody(Type.Object({}), false), audit: change('key.retired'),
    responses: { 200: ok('The retired key.', KeyView), ...refusals({ ...GUARD_REFUSALS, not_found: '', conflict: '' }) },
  },
} satisfies Record<string, RouteDeclaration>;

export function signingKeyHandlers(deps: { keys: KeyManager }): Record<keyof typeof signingKeyRouteTable, Handler> {
  return {
    keyList: () => json(200, { keys: deps.keys.list().map(presentKey) }),
    keyRotate: async (r) => {
      const key = await deps.keys.rotate(by(r));
      return json(200, presentKey(key));
    },
    keyRetire: async (r) => {
      const key = await deps.keys.retire(r.params.kid, by(r));
      return json(200, presentKey(key));
    },
  };
}
