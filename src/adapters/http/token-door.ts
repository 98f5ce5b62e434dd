// One exchange, two front doors. The contract's POST /api/v1/auth/token (public-routes.ts) and the RFC 6749
// client-credentials grant (oauth-routes.ts) differ only in how they read a request and how they render
// the answer; what the door does with an exchange's outcome (the metric, the count of refusals before any
// credential check, when a store outage becomes a refusal) is decided here, once, for both. The audit trail
// has one entrance, the core: TokenService records token.issued and the refusals of a credential check.
import { ServiceError, StoreUnavailableError, toServiceError } from '../../core/errors.js';
import type { IssuedToken, TokenRequest, TokenService } from '../../core/tokens/token-service.js';
import type { HttpMetrics } from './http-metrics.js';
import type { HttpRequest } from './types.js';

/** Refusals before any credential check: counted per window, one log line (UncheckedRefusals below). */
export interface UncheckedRefusalCount {
  refused(errorCode: string, clientAddress: string): void;
}

export interface TokenDoorDeps {
  tokens: TokenService;
  metrics: HttpMetrics;
  /** Refusals before any credential check (never stored: docs/audit.md). */
  unchecked: UncheckedRefusalCount;
}

/** What a door renders: a token, or the refusal in the catalog's terms (Retry-After kept). */
export type DoorOutcome = { issued: IssuedToken } | { refused: ServiceError };

/**
 * The token exchange behind both doors, called once per request: a door reads the request into the core's
 * TokenRequest, then either hands it to `exchange` or, when reading refused it, reports that refusal
 * (`refusedRead`, `refusedForm`); it renders what it gets back in its own shape.
 */
export class TokenDoor {
  constructor(private readonly deps: TokenDoorDeps) {}

  /** Exchanges and counts (the core records the token, or the refusal of a credential check). */
  async exchange(request: HttpRequest, tokenRequest: TokenRequest): Promise<DoorOutcome> {
    const outcome = await this.deps.tokens.exchange(tokenRequest, request.address, request.signal);
    if ('issued' in outcome) {
      this.deps.metrics.tokenOutcome('issued');
      return outcome;
    }
    return { refused: this.refused(request, outcome.refused, outcome.checked) };
  }

  /**
   * Reading the request refused it (a malformed body; the OAuth door's domain index unreadable in an
   * outage): counted like a refusal of the exchange before any credential check. Anything but a
   * ServiceError or a store outage is a defect and is rethrown.
   */
  refusedRead(request: HttpRequest, error: unknown): ServiceError {
    if (!(error instanceof ServiceError || error instanceof StoreUnavailableError)) throw error;
    return this.refused(request, error, false);
  }

  /** The door refused the request's form in its own shape: counted as `validation_error`, before any credential check. */
  refusedForm(request: HttpRequest): void {
    this.count(request, 'validation_error', false);
  }

  private refused(request: HttpRequest, error: ServiceError | StoreUnavailableError, checked: boolean): ServiceError {
    const refusal = toServiceError(error);
    this.count(request, error instanceof ServiceError ? refusal.code : 'unavailable', checked, refusal.code);
    return refusal;
  }

  /** In the metrics always; a refusal before any credential check also in the window's log line. */
  private count(request: HttpRequest, metric: string, checked: boolean, errorCode = metric): void {
    this.deps.metrics.tokenOutcome(metric);
    if (!checked && !request.signal.aborted) this.deps.unchecked.refused(errorCode, request.address);
  }
}

export interface UncheckedRefusalsOptions {
  windowSeconds: number;
  /** Once per window with refusals before a credential check: their count per code, and one address. */
  log(summary: { byCode: Record<string, number>; exampleAddress: string; windowSeconds: number }): void;
}

/**
 * Refusals before any credential check (415, 422, 400, a bad profile, the per-address 429s, 503): never
 * stored (a durable row each would let one client write rows as fast as it sends bad requests), counted in
 * ace_tokens_issued_total{outcome} by the door and summed here into one log line per window and process.
 */
export class UncheckedRefusals implements UncheckedRefusalCount {
  private readonly byCode = new Map<string, number>();
  private example = '';
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly options: UncheckedRefusalsOptions) {
    this.timer = setInterval(() => this.endWindow(), options.windowSeconds * 1000);
    this.timer.unref();
  }

  refused(errorCode: string, clientAddress: string): void {
    this.byCode.set(errorCode, (this.byCode.get(errorCode) ?? 0) + 1);
    if (!this.example) this.example = clientAddress;
  }

  /** Ends the window now: its log line, if it had any refusal. */
  endWindow(): void {
    if (this.byCode.size === 0) return;
    this.options.log({ byCode: Object.fromEntries(this.byCode), exampleAddress: this.example, windowSeconds: this.options.windowSeconds });
    this.byCode.clear();
    this.example = '';
  }

  close(): void {
    clearInterval(this.timer);
    this.endWindow();
  }
}
