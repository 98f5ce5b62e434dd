// The one catalog of error codes, with the default detail of each. The core refuses with a code (and, for
// a refusal that passes, how long to wait); how a code is answered over HTTP (status, headers, the
// contract's Error body) is the HTTP adapter's: adapters/http/errors.ts.

import type { ClientAuthentication } from './credentials/client-authentication.js';

export const ERRORS = {
  invalid_json: { detail: 'Request body is not valid JSON.' },
  bad_request: { detail: 'Malformed request.' },
  invalid_credentials: { detail: 'Invalid credentials.' },
  unauthorized: { detail: 'Missing or invalid admin token.' },
  agent_inactive: { detail: 'The agent is inactive.' },
  platform_access_denied: { detail: 'The agent has no access to this platform.' },
  invalid_scope: { detail: 'The requested scopes are not granted to the agent on this platform.' },
  not_found: { detail: 'Not found.' },
  method_not_allowed: { detail: 'Method not allowed.' },
  conflict: { detail: 'The request conflicts with the current state.' },
  payload_too_large: { detail: 'Request body is too large.' },
  unsupported_media_type: { detail: 'Content-Type must be application/json.' },
  validation_error: { detail: 'Request validation failed.' },
  unsupported_profile: { detail: 'Unsupported token profile.' },
  rate_limited: { detail: 'Too many requests.' },
  internal_error: { detail: 'Internal error.' },
  not_implemented: { detail: 'Not implemented.' },
  service_unavailable: { detail: 'Service temporarily unavailable.' },
} as const satisfies Record<string, { detail: string }>;

export type ErrorCode = keyof typeof ERRORS;

/** A failure with a catalog code. `retryAfterSeconds`: when trying again may succeed (a limit, an outage). */
export class ServiceError extends Error {
  constructor(
    readonly code: ErrorCode,
    detail?: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(detail ?? ERRORS[code].detail);
    this.name = 'ServiceError';
  }
}

/**
 * A refusal of a credential check, with what the audit trail records of it (never sent to the client): the
 * agent behind the key id when it exists, and how the client tried to authenticate (what it claimed).
 */
export class CredentialRefusal extends ServiceError {
  constructor(
    code: ErrorCode,
    /** The agent whose api_key_id was presented, when it exists. */
    readonly agentId: string | undefined,
    detail?: string,
    /** The method and what the client claimed (unverified: the event builder cleans and bounds it). */
    readonly claimed?: ClientAuthentication,
  ) {
    super(code, detail);
    this.name = 'CredentialRefusal';
  }
}

/** A store (Postgres or Redis) that could not answer in time: `service_unavailable`, retry after a second. */
export class StoreUnavailableError extends Error {
  /** Stable code for logs and callers (the HTTP answer is always `service_unavailable`). */
  readonly code: 'store_unavailable' | 'write_outcome_unknown' = 'store_unavailable';
  constructor(readonly store: string, cause?: unknown) {
    super(`${store} unavailable`, { cause });
    this.name = 'StoreUnavailableError';
  }
}

/**
 * A write whose outcome is unknown: its COMMIT was sent but no answer came before the store deadline
 * (a stalled or broken connection). Refused like any store outage (service_unavailable), but whoever caches must drop
 * everything it holds, since the write may have been applied. `settled` resolves once the driver learns
 * the outcome (or gives up on the connection): a second invalidation then closes the window.
 */
export class WriteDeadlineError extends StoreUnavailableError {
  override readonly code = 'write_outcome_unknown';
  constructor(
    store: string,
    readonly settled: Promise<void>,
    cause?: unknown,
  ) {
    super(store, cause);
    this.name = 'WriteDeadlineError';
  }
}

export function unavailable(retryAfterSeconds = 1, detail?: string): ServiceError {
  return new ServiceError('service_unavailable', detail, retryAfterSeconds);
}

/** The service_unavailable of crypto work shed or lost: a full waiting line, or a worker thread that crashed or hung. */
export function busy(retryAfterSeconds = 1): ServiceError {
  return unavailable(retryAfterSeconds, 'The service is busy; retry shortly.');
}

/** Maps anything thrown to a ServiceError; unknown errors become a bare internal_error with no internals. */
export function toServiceError(error: unknown): ServiceError {
  if (error instanceof ServiceError) return error;
  if (error instanceof StoreUnavailableError) return unavailable(1);
  return new ServiceError('internal_error');
}
