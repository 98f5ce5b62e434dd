// One exchange, two front doors. The contract's POST /api/v1/auth/token (public-routes.ts) and the RFC 6749
// client-credentials grant (oauth-routes.ts) differ only in how they read a request and how they render
// the answer; what an exchange's outcome means (the metric, the refusal's record in the audit trail, when
// a store outage becomes a refusal) is decided here, once, for both.
import { ServiceError, StoreUnavailableError, toServiceError } from '../../core/errors.js';
import type { ExchangeOutcome, IssuedToken, TokenRequest, TokenService } from '../../core/tokens/token-service.js';
import type { HttpMetrics } from './http-metrics.js';
import type { HttpRequest } from './types.js';

/** What a token door reports of a refusal (implemented by the audit trail's RefusalRecorder). */
export interface TokenRefusals {
  refused(refusal: { errorCode: string; agentId?: string; apiKeyId?: string; platformId?: string; clientAddress: string; checked: boolean }): void;
}

export interface TokenDoorDeps {
  tokens: TokenService;
  metrics: HttpMetrics;
  /** Token refusals: recorded (bounded per address and agent) or counted (audit-trail/refusals.ts). */
  refusals: TokenRefusals;
}

/** What the door has read of the request so far: recorded with a refusal (never the secret). */
export interface SeenRequest {
  apiKeyId?: string;
  /** Lower case, as the store keeps it. */
  platformId?: string;
}

/** What a door renders: a token, or the refusal in the catalog's terms (Retry-After kept). */
export type DoorOutcome = { issued: IssuedToken } | { refused: ServiceError };

/**
 * The token exchange behind both doors, called once per request: a door reads the request into the core's
 * TokenRequest (filling `seen` as it learns the key id and the platform), then either hands it to
 * `exchange` or, when reading refused it, reports that refusal (`refusedRead`, `refusedForm`); it renders
 * what it gets back in its own shape.
 */
export class TokenDoor {
  constructor(private readonly deps: TokenDoorDeps) {}

  /** Exchanges, counts and records (a refusal in the next audit batch). */
  async exchange(request: HttpRequest, seen: SeenRequest, tokenRequest: TokenRequest): Promise<DoorOutcome> {
    const outcome: ExchangeOutcome = await this.deps.tokens.exchange(tokenRequest, request.address, request.signal);
    if ('issued' in outcome) {
      this.deps.metrics.tokenOutcome('issued');
      return outcome;
    }
    return { refused: this.refused(request, seen, outcome.refused, outcome.agentId) };
  }

  /**
   * Reading the request refused it (a malformed body; the OAuth door's domain index unreadable in an
   * outage): reported like a refusal of the exchange. Anything but a ServiceError or a store outage is a
   * defect and is rethrown.
   */
  refusedRead(request: HttpRequest, seen: SeenRequest, error: unknown): ServiceError {
    if (!(error instanceof ServiceError || error instanceof StoreUnavailableError)) throw error;
    return this.refused(request, seen, error, undefined);
  }

  /** The door refused the request's form in its own shape: reported as `validation_error`, before any credential check. */
  refusedForm(request: HttpRequest, seen: SeenRequest): void {
    this.report(request, seen, 'validation_error', undefined, false);
  }

  private refused(request: HttpRequest, seen: SeenRequest, error: ServiceError | StoreUnavailableError, agentId: string | undefined): ServiceError {
    const refusal = toServiceError(error);
    // Only refusals of a credential check are recorded (bounded); earlier ones are counted (refusals.ts).
    const checked = agentId !== undefined || refusal.code === 'invalid_credentials';
    this.report(request, seen, error instanceof ServiceError ? refusal.code : 'unavailable', agentId, checked, refusal.code);
    return refusal;
  }

  /**
   * Counted now; recorded in the next batch without holding the answer: a refusal costs the same with or
   * without an agent behind the key id (no timing signal), and an audit outage never turns 401 into 503.
   */
  private report(request: HttpRequest, seen: SeenRequest, metric: string, agentId: string | undefined, checked: boolean, errorCode = metric): void {
    this.deps.metrics.tokenOutcome(metric);
    if (request.signal.aborted) return;
    this.deps.refusals.refused({ errorCode, agentId, apiKeyId: seen.apiKeyId, platformId: seen.platformId, clientAddress: request.address, checked });
  }
}
