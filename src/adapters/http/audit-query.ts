// Reading the trail: the filters of GET /admin/v1/events, validated (a bad parameter is a 422 that
// names it, an unknown one too, so a typo never silently widens a security query), and the opaque
// cursor, which is the position (at, id) of the last event of the previous page.
import { ServiceError } from '../../core/errors.js';
import type { AuditStore, EventQuery } from '../../core/ports/audit-store.js';
import { EVENT_TYPES, type AuditEvent, type EventType } from '../../core/audit/events.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// RFC 3339 date-time: a full date, time, optional fraction, and Z or an offset.
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;
const KNOWN = new Set(['type', 'agent_id', 'platform_id', 'since', 'until', 'limit', 'cursor']);
export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;

const bad = (name: string, rule: string) => new ServiceError('validation_error', `${name} ${rule}.`);

export function encodeCursor(event: Pick<AuditEvent, 'at' | 'id'>): string {
  return Buffer.from(`${event.at}.${event.id}`).toString('base64url');
}

function decodeCursor(cursor: string): { at: number; id: string } {
  const text = /^[A-Za-z0-9_-]{1,200}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString() : '';
  const m = /^(\d{1,15})\.(.+)$/.exec(text);
  if (!m || !UUID.test(m[2])) throw bad('cursor', 'is not a cursor returned by this endpoint');
  return { at: Number(m[1]), id: m[2].toLowerCase() };
}

function instant(name: string, value: string): number {
  const ms = RFC3339.test(value) ? Date.parse(value) : NaN;
  if (!Number.isFinite(ms)) throw bad(name, 'must be an RFC 3339 date-time, e.g. 2026-01-31T12:00:00Z');
  return ms;
}

/** Parses a raw query string into a store query (limit + 1 rows, to know whether a next page exists). */
export function parseEventQuery(raw: string): EventQuery {
  const params = new URLSearchParams(raw);
  const seen = new Set<string>();
  const types = new Set<EventType>();
  const query: EventQuery = { types: [], limit: DEFAULT_LIMIT };
  for (const [name, value] of params) {
    if (!KNOWN.has(name)) throw bad(name, 'is not an accepted parameter (type, agent_id, platform_id, since, until, limit, cursor)');
    if (name !== 'type' && seen.has(name)) throw bad(name, 'must be given once');
    seen.add(name);
    switch (name) {
      case 'type':
        for (const t of value.split(',')) {
          if (!(EVENT_TYPES as readonly string[]).includes(t)) throw bad('type', `must be one or more of ${EVENT_TYPES.join(', ')} separated by commas`);
          types.add(t as EventType);
        }
        break;
      case 'agent_id':
      case 'platform_id':
        if (!UUID.test(value)) throw bad(name, 'must be a UUID');
        if (name === 'agent_id') query.agentId = value.toLowerCase();
        else query.platformId = value.toLowerCase();
        break;
      case 'since':
        query.since = instant(name, value);
        break;
      case 'until':
        query.until = instant(name, value);
        break;
      case 'limit':
        if (!/^\d{1,4}$/.test(value) || Number(value) < 1 || Number(value) > MAX_LIMIT) throw bad('limit', `must be a whole number from 1 to ${MAX_LIMIT}`);
        query.limit = Number(value);
        break;
      case 'cursor':
        query.after = decodeCursor(value);
        break;
    }
  }
  if (query.since !== undefined && query.until !== undefined && query.until < query.since) throw bad('until', 'must not be before since');
  query.types = [...types];
  return query;
}

/** One page, oldest first, and the cursor of the next page (null on the last). */
export async function readEvents(store: AuditStore, query: EventQuery): Promise<{ events: AuditEvent[]; nextCursor: string | null }> {
  const rows = await store.list({ ...query, limit: query.limit + 1 });
  const events = rows.slice(0, query.limit);
  const nextCursor = rows.length > query.limit ? encodeCursor(events[events.length - 1]) : null;
  return { events, nextCursor };
}

/** The API shape: id, type, at (RFC 3339, milliseconds), then the ids and fields that apply. */
export function presentEvent(e: AuditEvent): Record<string, unknown> {
  const out: Record<string, unknown> = { id: e.id, type: e.type, at: new Date(e.at).toISOString() };
  if (e.agentId) out.agent_id = e.agentId;
  if (e.platformId) out.platform_id = e.platformId;
  if (e.kid) out.kid = e.kid;
  if (e.jti) out.jti = e.jti;
  if (e.actor) out.actor = e.actor;
  if (e.clientAddress) out.client_address = e.clientAddress;
  if (e.data) Object.assign(out, e.data);
  return out;
}
