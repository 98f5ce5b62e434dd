// Failures of the agent client. Messages carry the service's `detail` and `error_code`, never credentials.

export class AgentClientError extends Error {
  constructor(
    message: string,
    /** HTTP status of the service's answer, when there was one. */
    readonly status?: number,
    /** The service's error_code, when it gave one. */
    readonly code?: string,
    /** Seconds the service asked to wait (429/503), when it said. */
    readonly retryAfterSeconds?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'AgentClientError';
  }
}
