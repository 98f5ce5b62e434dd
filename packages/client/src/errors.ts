// Failures of the agent client. Messages carry the service's `detail` and `error_code`, never credentials.

/** `code` of a failure the service did not describe itself. */
export const ERR_UNREACHABLE = 'ERR_ACE_UNREACHABLE';
export const ERR_BAD_RESPONSE = 'ERR_ACE_BAD_RESPONSE';

/**
 * Every failure of the agent client. `code` is stable and always set: the service's `error_code` from the
 * contract's catalog (`invalid_credentials`, `rate_limited`, `insufficient_scope`, …) when the service
 * answered with one, else `ERR_ACE_UNREACHABLE` (no answer after the retries) or `ERR_ACE_BAD_RESPONSE`
 * (an answer that is not the contract's).
 *
 * @example
 * try { await client.fetch(platformId, url); }
 * catch (error) { if (error instanceof AgentClientError && error.code === 'invalid_credentials') rotateSecret(); }
 */
export class AgentClientError extends Error {
  readonly code: string;
  constructor(
    message: string,
    /** HTTP status of the service's answer, when there was one. */
    readonly status?: number,
    /** The service's error_code, when it gave one. */
    code?: string,
    /** Seconds the service asked to wait (429/503), when it said. */
    readonly retryAfterSeconds?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'AgentClientError';
    this.code = code ?? (status === undefined ? ERR_UNREACHABLE : ERR_BAD_RESPONSE);
  }
}

/**
 * The service kept answering with something worth retrying (429, 502, 503, 504, or no answer) until the
 * call's wait budget (`maxWaitMs`), the optional `maxRetries`, or `maxRetryDelaySeconds` (a Retry-After
 * longer than that) ended it. `status`, `code` and `retryAfterSeconds` describe the last answer as for any
 * AgentClientError (so `code` is the service's error_code, or ERR_ACE_UNREACHABLE when nothing answered).
 *
 * @example
 * catch (error) { if (error instanceof RetriesExhaustedError) scheduleRestart(error.retryAfterSeconds); }
 */
export class RetriesExhaustedError extends AgentClientError {
  constructor(
    message: string,
    status: number | undefined,
    code: string | undefined,
    retryAfterSeconds: number | undefined,
    /** Which bound ended the retries. */
    readonly reason: 'maxWaitMs' | 'maxRetries' | 'maxRetryDelaySeconds',
    /** Attempts made, the first included. */
    readonly attempts: number,
    /** Time from the first attempt to giving up. */
    readonly elapsedMs: number,
    options?: { cause?: unknown },
  ) {
    super(message, status, code, retryAfterSeconds, options);
    this.name = 'RetriesExhaustedError';
  }
}
