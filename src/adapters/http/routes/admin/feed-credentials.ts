// Admin API, a platform's revocation feed credentials: create (the token shown once), list, delete.
import { Type } from '@sinclair/typebox';
import { FeedCredentialCreated, FeedCredentialList } from '../../schemas/admin.js';
import type { PlatformService } from '../../../../core/platforms/platform-service.js';
import type { FeedCredentialService } from '../../../../core/revocation/feed-credential-service.js';
import type { FeedCredential } from '../../../../core/ports/feed-credentials.js';
import { refusals } from '../../responses.js';
import { json, type Handler, type RouteDeclaration } from '../../types.js';
import { admin, by, change, GUARD_REFUSALS, jsonBody, NO_STORE, ok, PLATFORM_ID, uuidParam } from './common.js';

const presentFeedCredential = (c: FeedCredential) => ({ feed_credential_id: c.id, platform_id: c.platformId, created_at: c.createdAt.toISOString() });

export const feedCredentialRouteTable = {
  feedCredentialCreate: {
    ...admin, method: 'POST', path: '/admin/v1/platforms/:platform_id/feed-credentials', name: 'admin_platform_feed_credentials', operationId: 'adminCreateFeedCredential',
    summary: "Create a credential for the platform's revocation feed (its token is shown once)", params: PLATFORM_ID,
    // The body, if any, is not read.
    body: jsonBody(Type.Object({}), false), audit: change('feed_credential.created'),
    responses: { 201: { ...ok('Created.', FeedCredentialCreated), headers: NO_STORE }, ...refusals({ ...GUARD_REFUSALS, not_found: '', conflict: 'the platform has 10 feed credentials already.' }) },
  },
  feedCredentialList: {
    ...admin, method: 'GET', path: '/admin/v1/platforms/:platform_id/feed-credentials', name: 'admin_platform_feed_credentials', operationId: 'adminListFeedCredentials',
    summary: "List the platform's feed credentials (ids and creation times, never a token)", params: PLATFORM_ID,
    responses: { 200: ok('Its feed credentials, oldest first.', FeedCredentialList), ...refusals({ ...GUARD_REFUSALS, not_found: '' }) },
  },
  feedCredentialDelete: {
    ...admin, method: 'DELETE', path: '/admin/v1/platforms/:platform_id/feed-credentials/:feed_credential_id', name: 'admin_platform_feed_credential', operationId: 'adminDeleteFeedCredential',
    summary: 'Revoke a feed credential (polls with it are refused and sockets that used it are closed, on every instance)',
    params: { ...PLATFORM_ID, feed_credential_id: Type.String({ format: 'uuid' }) }, audit: change('feed_credential.deleted'),
    responses: { 204: { description: 'Deleted.' }, ...refusals({ ...GUARD_REFUSALS, not_found: '' }) },
  },
} satisfies Record<string, RouteDeclaration>;

export function feedCredentialHandlers(deps: { platforms: PlatformService; feedCredentials: FeedCredentialService }): Record<keyof typeof feedCredentialRouteTable, Handler> {
  return {
    feedCredentialCreate: async (r) => {
      const { credential, token } = await deps.feedCredentials.create(uuidParam(r, 'platform_id'), by(r));
      return json(201, { ...presentFeedCredential(credential), feed_token: token }, { 'Cache-Control': 'no-store' });
    },
    feedCredentialList: async (r) => {
      const platform = await deps.platforms.get(uuidParam(r, 'platform_id'));
      return json(200, { feed_credentials: (await deps.feedCredentials.list(platform.id)).map(presentFeedCredential) });
    },
    feedCredentialDelete: async (r) => {
      await deps.feedCredentials.delete(uuidParam(r, 'platform_id'), uuidParam(r, 'feed_credential_id'), by(r));
      return { status: 204 };
    },
  };
}
