// Building blocks of route declarations' `responses`: refusals named by their catalog code (errors.ts),
// grouped by status, each with the contract's Error shape; and the answers every JSON body can get.
import { Type } from '@sinclair/typebox';
import { ERRORS, type ErrorCode } from '../../core/errors.js';
import { ERROR_STATUS } from './errors.js';
import { ErrorBody } from './schemas/public.js';
import { MAX_BODY_BYTES, type ResponseHeaderSpec, type ResponseSpec } from './types.js';

/** Error code -> what it means on this route ('' when the catalog's detail says it all). */
export type RefusalNotes = Partial<Record<ErrorCode, string>>;

const RETRY_AFTER: ResponseHeaderSpec = { description: 'Seconds to wait (integer, at least 1).', schema: Type.Integer({ minimum: 1 }) };

/** Headers the server sends with a refusal of this status (refusalReply). */
const HEADERS_BY_STATUS: Record<number, Record<string, ResponseHeaderSpec>> = {
  405: { Allow: { description: 'The methods this path accepts.', schema: Type.String() } },
  429: { 'Retry-After': RETRY_AFTER },
  503: { 'Retry-After': RETRY_AFTER },
};

/**
 * The refusals a route can answer, as responses: one per status, its description listing each code.
 * Merge several with `refusals({...a, ...b})`; a later note for the same code wins.
 */
export function refusals(notes: RefusalNotes, extraHeaders: Record<number, Record<string, ResponseHeaderSpec>> = {}): Record<number, ResponseSpec> {
  const byStatus = new Map<number, string[]>();
  for (const [code, note] of Object.entries(notes) as [ErrorCode, string][]) {
    const status = ERROR_STATUS[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), note ? `\`${code}\`: ${note}` : `\`${code}\`: ${ERRORS[code].detail}`]);
  }
  const responses: Record<number, ResponseSpec> = {};
  for (const [status, lines] of [...byStatus].sort(([a], [b]) => a - b)) {
    const headers = { ...HEADERS_BY_STATUS[status], ...extraHeaders[status] };
    responses[status] = {
      description: lines.join(' '),
      ...(Object.keys(headers).length > 0 ? { headers } : {}),
      content: { 'application/json': ErrorBody },
    };
  }
  return responses;
}

/** What the server and parseJsonBody answer for any route that reads a JSON body. */
export const JSON_BODY_REFUSALS: RefusalNotes = {
  invalid_json: 'the body is not JSON.',
  bad_request: 'the length is ambiguous (more than one Content-Length, or chunked twice); the connection then closes.',
  payload_too_large: `the body is over ${MAX_BODY_BYTES / 1024} KiB.`,
  unsupported_media_type: 'Content-Type is not application/json.',
  not_implemented: 'a Transfer-Encoding other than chunked; the connection then closes.',
};

/** The answer to a conditional GET whose If-None-Match matched. */
export const NOT_MODIFIED: ResponseSpec = { description: 'Not modified: If-None-Match matched the ETag (no body).' };

export const ETAG_HEADER: ResponseHeaderSpec = { description: 'Strong entity tag of the representation.', schema: Type.String() };

/** A header whose value is always `value`. */
export const fixedHeader = (value: string, description?: string): ResponseHeaderSpec => ({
  ...(description ? { description } : {}),
  schema: Type.Literal(value),
});
