// Admin API, the audit trail: read it, newest first, a page at a time (docs/audit.md).
import { EventPage, EventQueryParams } from '../../schemas/admin.js';
import type { AuditStore } from '../../../../core/ports/audit-store.js';
import { parseEventQuery, presentEvent, readEvents } from '../../audit-query.js';
import { refusals } from '../../responses.js';
import { json, type Handler, type RouteDeclaration } from '../../types.js';
import { admin, GUARD_REFUSALS, NO_STORE, ok } from './common.js';

export const eventRouteTable = {
  events: {
    ...admin, method: 'GET', path: '/admin/v1/events', name: 'admin_events', operationId: 'adminListEvents',
    summary: 'Read the audit trail, newest first, a page at a time', query: EventQueryParams,
    responses: { 200: { ...ok('A page of events.', EventPage), headers: NO_STORE }, ...refusals({ ...GUARD_REFUSALS, validation_error: '' }) },
  },
} satisfies Record<string, RouteDeclaration>;

export function eventHandlers(deps: { auditStore: AuditStore }): Record<keyof typeof eventRouteTable, Handler> {
  return {
    events: async (r) => {
      const page = await readEvents(deps.auditStore, parseEventQuery(r.query));
      return json(200, { events: page.events.map(presentEvent), next_cursor: page.nextCursor }, { 'Cache-Control': 'no-store' });
    },
  };
}
