// What the admin API's routes share: the path parameters, the guard's refusals, the declaration helpers,
// the UUID parameter check and who made a change (for its audit event).
import { Type, type TSchema } from '@sinclair/typebox';
import { ServiceError } from '../../../../core/errors.js';
import { ADMIN_ACTOR, type ChangeBy, type EventType } from '../../../../core/audit/events.js';
import { UUID_PATTERN } from '../../schemas/public.js';
import { parseJsonBody } from '../../json-body.js';
import type { RefusalNotes } from '../../responses.js';
import type { HttpRequest, ResponseSpec } from '../../types.js';

const UUID = new RegExp(UUID_PATTERN);

export const AGENT_ID = { agent_id: Type.String({ format: 'uuid' }) };
export const PLATFORM_ID = { platform_id: Type.String({ format: 'uuid' }) };
/** Every admin route can answer these: the guard's, the stores'. */
export const GUARD_REFUSALS: RefusalNotes = {
  unauthorized: 'the bearer token is missing or wrong.',
  rate_limited: 'too many wrong tokens from this address.',
  service_unavailable: '',
};
export const ok = (description: string, schema: TSchema): ResponseSpec => ({ description, content: { 'application/json': schema } });
export const NO_STORE = { 'Cache-Control': { schema: Type.Literal('no-store') } };
export const change = (...events: EventType[]) => ({ kind: 'before_answer' as const, events });
export const jsonBody = <S extends TSchema>(schema: S, required = true) => ({ schema, contentType: 'application/json' as const, required });
export const admin = { auth: 'admin_bearer', audit: { kind: 'none' } } as const;

export function uuidParam(request: HttpRequest, name: string): string {
  const value = request.params[name];
  if (!UUID.test(value)) throw new ServiceError('not_found', `No record with this ${name}.`);
  return value.toLowerCase();
}

/**
 * Who made a change, for its audit event, which the core writes in the change's own transaction: a
 * change is acknowledged only with its event, and a 503 means neither was written.
 */
export const by = (r: HttpRequest, body?: object): ChangeBy => ({ actor: ADMIN_ACTOR, clientAddress: r.address, ...(body ? { fields: Object.keys(body) } : {}) });

/** An empty body on the rotate endpoints means "no options". */
export const optionalBody = (request: HttpRequest) => (request.body && request.body.length > 0 ? parseJsonBody(request) : {});
