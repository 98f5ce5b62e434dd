// The CLI's failure kinds. Each maps to one exit code so scripts can tell "fix your command" (2)
// from "the service said no" (1) from "the service is not there" (3).

export const EXIT = { ok: 0, failure: 1, usage: 2, unreachable: 3 } as const;

/** Wrong command line or unreadable input file: exit 2. */
export class UsageError extends Error {
  readonly exitCode = EXIT.usage;
  constructor(message: string, readonly helpFor?: string[]) {
    super(message);
    this.name = 'UsageError';
  }
}

/** The service answered with an error status (4xx/5xx) or something unparseable: exit 1. */
export class ServiceFailure extends Error {
  readonly exitCode = EXIT.failure;
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly errorCode: string | undefined,
    readonly request: string,
  ) {
    super(`${detail}${errorCode ? ` [${errorCode}]` : ''} (HTTP ${status} from ${request})`);
    this.name = 'ServiceFailure';
  }
}

/** No connection, or no answer in time: exit 3. */
export class ConnectionFailure extends Error {
  readonly exitCode = EXIT.unreachable;
  constructor(message: string) {
    super(message);
    this.name = 'ConnectionFailure';
  }
}

/** A local step failed after the service answered (e.g. writing the -o file): exit 1. */
export class LocalFailure extends Error {
  readonly exitCode = EXIT.failure;
  constructor(message: string) {
    super(message);
    this.name = 'LocalFailure';
  }
}

export type CliError = UsageError | ServiceFailure | ConnectionFailure | LocalFailure;

export function isCliError(error: unknown): error is CliError {
  return (
    error instanceof UsageError ||
    error instanceof ServiceFailure ||
    error instanceof ConnectionFailure ||
    error instanceof LocalFailure
  );
}
