// The one catalog of error codes: status and default detail for each.
// Every error body the service sends is {"detail": "...", "error_code": "..."} built from here.

export const ERRORS = {
  invalid_json: { status: 400, detail: 'Request body is not valid JSON.' },
  bad_request: { status: 400, detail: 'Malformed request.' },
  invalid_credentials: { status: 401, detail: 'Invalid credentials.' },
  unauthorized: { status: 401, detail: 'Missing or invalid admin token.' },
  agent_inactive: { status: 403, detail: 'The agent is inactive.' },
  platform_access_denied: { status: 403, detail: 'The agent has no access to this platform.' },
  invalid_scope: { status: 403, detail: 'The requested scopes are not granted to the agent on this platform.' },
  not_found: { status: 404, detail: 'Not found.' },
  method_not_allowed: { status: 405, detail: 'Method not allowed.' },
  conflict: { status: 409, detail: 'The request conflicts with the current state.' },
  payload_too_large: { status: 413, detail: 'Request body is too large.' },
  unsupported_media_type: { status: 415, detail: 'Content-Type must be application/json.' },
  validation_error: { status: 422, detail: 'Request validation failed.' },
  unsupported_profile: { status: 422, detail: 'Unsupported token profile.' },
  rate_limited: { status: 429, detail: 'Too many requests.' },
  internal_error: { status: 500, detail: 'Internal error.' },
  not_implemented: { status: 501, detail: 'Not implemented.' },
  service_unavailable: { status: 503, detail: 'Service temporarily unavailable.' },
} as const satisfies Record<string, { status: number; detail: string }>;

export type ErrorCode = keyof typeof ERRORS;

/** A failure with a catalog code. `headers` carries e.g. Retry-After or Allow. */
export class ServiceError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    detail?: string,
    readonly headers?: Record<string, string>,
  ) {
    super(detail ?? ERRORS[code].detail);
    this.name = 'ServiceError';
    this.status = ERRORS[code].status;
  }

  body(): string {
    return JSON.stringify({ detail: this.message, error_code: this.code });
  }
}

/** A refusal of a credential check that names the agent behind the key id (for the audit trail only). */
export class CredentialRefusal extends ServiceError {
  constructor(
    code: ErrorCode,
    /** The agent whose api_key_id was presented, when it exists (never sent to the client). */
    readonly agentId: string | undefined,
    detail?: string,
  ) {
    super(code, detail);
    this.name = 'CredentialRefusal';
  }
}

/** A store (Postgres or Redis) that could not answer in time. Mapped to 503 with Retry-After. */
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
 * (a stalled or broken connection). Answered as 503 like any store outage, but whoever caches must drop
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
  return new ServiceError('service_unavailable', detail, { 'Retry-After': String(retryAfterSeconds) });
}

/** The 503 of crypto work shed or lost: a full waiting line, or a worker thread that crashed or hung. */
export function busy(retryAfterSeconds = 1): ServiceError {
  return unavailable(retryAfterSeconds, 'The service is busy; retry shortly.');
}

/** Maps anything thrown to a ServiceError; unknown errors become a bare 500 with no internals. */
export function toServiceError(error: unknown): ServiceError {
  if (error instanceof ServiceError) return error;
  if (error instanceof StoreUnavailableError) return unavailable(1);
  return new ServiceError('internal_error');
}
