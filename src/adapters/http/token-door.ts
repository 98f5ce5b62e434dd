// One exchange, two front doors. The contract's POST /api/v1/auth/token (public-routes.ts) and the RFC 6749
// client-credentials grant (oauth-routes.ts) differ only in how they read a request and how they render
// the answer; what an exchange's outcome means (the metric, the refusal's record in the audit trail, when
// a store outage becomes a refusal) is decided here, once, for both.
import { ServiceError, StoreUnavailableError, toServiceError } from '../../core/errors.js';
import type { ExchangeOutcome, IssuedToken, TokenRequest, TokenService } from '../../core/tokens/token-service.js';
import type { Metrics } from '../telemetry/index.js';
import type { HttpReply, HttpRequest } from './types.js';

/** What a token door reports of a refusal (implemented by the audit trail's RefusalRecorder). */
export interface TokenRefusals {
  refused(refusal: { errorCode: string; agentId?: string; apiKeyId?: string; platformId?: string; clientAddress: string; checked: boolean }): void;
}

export interface TokenDoorDeps {
  tokens: TokenService;
  metrics: Metrics;
  /** Token refusals: recorded (bounded per address and agent) or counted (audit-trail/refusals.ts). */
  refusals: TokenRefusals;
}

/** What the door has read of the request so far: recorded with a refusal (never the secret). */
export interface SeenRequest {
  apiKeyId?: string;
  /** Lower case, as the store keeps it. */
  platformId?: string;
}

/** How one door reads a request and renders the outcome. */
export interface TokenDoorSpec {
  /**
   * Reads the request into the core's TokenRequest, filling `seen` as it learns the key id and the
   * platform. Throws a ServiceError (or StoreUnavailableError) to refuse it: reported like a refusal of
   * the exchange, then rendered by `refused`.
   */
  read(seen: SeenRequest): TokenRequest | Promise<TokenRequest>;
  /**
   * The door's own refusal of the request's form (its own error type, already in its own shape):
   * reported as `validation_error` before any credential check, and answered as is. Undefined when
   * `error` is not one (it is then handled as above, or rethrown as a defect).
   */
  formRefusal?(error: unknown): HttpReply | undefined;
  issued(token: IssuedToken): HttpReply;
  /** Renders a refusal (the contract's door throws it to the server's Error shape). */
  refused(refusal: ServiceError): HttpReply;
}

/** The token exchange behind both doors: read, exchange, count, record, render. */
export class TokenDoor {
  constructor(private readonly deps: TokenDoorDeps) {}

  async answer(request: HttpRequest, door: TokenDoorSpec): Promise<HttpReply> {
    const seen: SeenRequest = {};
    let outcome: ExchangeOutcome;
    try {
      const tokenRequest = await door.read(seen);
      outcome = await this.deps.tokens.exchange(tokenRequest, request.address, request.signal);
    } catch (error) {
      const own = door.formRefusal?.(error);
      if (own) {
        this.report(request, seen, 'validation_error', undefined, false);
        return own;
      }
      // A refusal while reading (a malformed body; the OAuth door's domain index unreadable in an outage).
      if (!(error instanceof ServiceError || error instanceof StoreUnavailableError)) throw error;
      outcome = { refused: error, agentId: undefined };
    }
    if ('issued' in outcome) {
      this.deps.metrics.tokenOutcome('issued');
      return door.issued(outcome.issued);
    }
    const refusal = toServiceError(outcome.refused);
    // Only refusals of a credential check are recorded (bounded); earlier ones are counted (refusals.ts).
    const checked = outcome.agentId !== undefined || refusal.code === 'invalid_credentials';
    this.report(request, seen, outcome.refused instanceof ServiceError ? refusal.code : 'unavailable', outcome.agentId, checked, refusal.code);
    return door.refused(refusal);
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
