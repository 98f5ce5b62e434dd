// How the core's error codes (core/errors.ts) are answered over HTTP: the status of each, Retry-After from
// the error's wait, and the contract's Error body {"detail", "error_code"}.
import { ServiceError, type ErrorCode } from '../../core/errors.js';

export const ERROR_STATUS = {
  invalid_json: 400,
  bad_request: 400,
  invalid_credentials: 401,
  unauthorized: 401,
  agent_inactive: 403,
  platform_access_denied: 403,
  invalid_scope: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation_error: 422,
  unsupported_profile: 422,
  rate_limited: 429,
  internal_error: 500,
  not_implemented: 501,
  service_unavailable: 503,
} as const satisfies Record<ErrorCode, number>;

export function httpStatus(error: ServiceError): number {
  return ERROR_STATUS[error.code];
}

/** The contract's Error body. */
export function errorBody(error: ServiceError): string {
  return JSON.stringify({ detail: error.message, error_code: error.code });
}

/** A refusal the HTTP adapter itself makes with headers of its own (an authentication challenge). */
export class HttpError extends ServiceError {
  constructor(
    code: ErrorCode,
    detail: string | undefined,
    readonly headers: Record<string, string>,
  ) {
    super(code, detail);
    this.name = 'HttpError';
  }
}

/** The headers a refusal carries of its own: Retry-After when the error says when to try again, a challenge. */
export function errorHeaders(error: ServiceError): Record<string, string> | undefined {
  const own = error instanceof HttpError ? error.headers : undefined;
  return error.retryAfterSeconds === undefined ? own : { 'Retry-After': String(error.retryAfterSeconds), ...own };
}
