// Admin API, platforms: register, list, read and change a platform (docs/admin-api.md).
import { PlatformCreate, PlatformList, PlatformPatch, PlatformView } from '../../schemas/admin.js';
import { compileValidator } from '../../schemas/validate.js';
import type { PlatformChange, PlatformDraft, PlatformService } from '../../../../core/platforms/platform-service.js';
import type { PlatformRecord } from '../../../../core/model.js';
import { parseJsonBody } from '../../json-body.js';
import { JSON_BODY_REFUSALS, refusals } from '../../responses.js';
import { json, type Handler, type RouteDeclaration } from '../../types.js';
import { admin, by, change, GUARD_REFUSALS, jsonBody, ok, PLATFORM_ID, uuidParam } from './common.js';

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
  resources: p.resources,
  created_at: p.createdAt,
  updated_at: p.updatedAt,
});

export const platformRouteTable = {
  platformCreate: {
    ...admin, method: 'POST', path: '/admin/v1/platforms', name: 'admin_platforms', operationId: 'adminCreatePlatform',
    summary: 'Register a platform', body: jsonBody(PlatformCreate), audit: change('platform.created'),
    responses: { 201: ok('Created.', PlatformView), ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, validation_error: '', conflict: '' }) },
  },
  platformList: {
    ...admin, method: 'GET', path: '/admin/v1/platforms', name: 'admin_platforms', operationId: 'adminListPlatforms',
    summary: 'List platforms', responses: { 200: ok('Every platform.', PlatformList), ...refusals(GUARD_REFUSALS) },
  },
  platformGet: {
    ...admin, method: 'GET', path: '/admin/v1/platforms/:platform_id', name: 'admin_platform', operationId: 'adminGetPlatform',
    summary: 'Read a platform', params: PLATFORM_ID,
    responses: { 200: ok('The platform.', PlatformView), ...refusals({ ...GUARD_REFUSALS, not_found: '' }) },
  },
  platformPatch: {
    ...admin, method: 'PATCH', path: '/admin/v1/platforms/:platform_id', name: 'admin_platform', operationId: 'adminUpdatePlatform',
    summary: 'Change a platform (only the fields given)', params: PLATFORM_ID, body: jsonBody(PlatformPatch), audit: change('platform.updated'),
    responses: { 200: ok('The changed platform.', PlatformView), ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, not_found: '', validation_error: '', conflict: '' }) },
  },
} satisfies Record<string, RouteDeclaration>;

export function platformHandlers(deps: { platforms: PlatformService }): Record<keyof typeof platformRouteTable, Handler> {
  const platformCreate = compileValidator(platformRouteTable.platformCreate.body.schema);
  const platformPatch = compileValidator(platformRouteTable.platformPatch.body.schema);
  return {
    platformCreate: async (r) => {
      const body = platformCreate(parseJsonBody(r));
      const platform = await deps.platforms.create(toPlatformChange(body) as PlatformDraft, by(r, body));
      return json(201, presentPlatform(platform));
    },
    platformList: async () => json(200, { platforms: (await deps.platforms.list()).map(presentPlatform) }),
    platformGet: async (r) => json(200, presentPlatform(await deps.platforms.get(uuidParam(r, 'platform_id')))),
    platformPatch: async (r) => {
      const id = uuidParam(r, 'platform_id');
      const body = platformPatch(parseJsonBody(r));
      const platform = await deps.platforms.update(id, toPlatformChange(body), by(r, body));
      return json(200, presentPlatform(platform));
    },
  };
}
