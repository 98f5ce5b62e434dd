// The HTTP adapter's series: requests by route, method and status and their duration, token requests by
// outcome (the token door), X-Forwarded-For headers ignored, and failed admin bearers. Label values are
// route patterns, known methods, status codes and catalog codes: never an id, a key or a secret.
import client from 'prom-client';
import { PendingCounts, RequestSeries } from '../telemetry/index.js';
import { ERRORS } from '../../core/errors.js';

// Label values of ace_http_*{method}: what server.ts passes (knownMethod), nothing else.
const HTTP_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'other']);

export type ForwardedIgnoredReason = 'untrusted_peer' | 'trust_proxy_off';

export interface HttpMetricsOptions {
  registry: client.Registry;
}

export class HttpMetrics {
  /** ace_http_requests_total and ace_http_request_duration_seconds (request-series.ts: no label hashing per request). */
  private readonly requests: RequestSeries;
  private readonly tokens: client.Counter<'outcome'>;
  /** Counted on every token request: plain numbers, added to the counter when scraped (pending-counts.ts). */
  private readonly tokenCounts = new PendingCounts({ labelNames: ['outcome'] });
  private readonly forwardedIgnored: client.Counter<'reason'>;
  private readonly adminAuthFailures: client.Counter;

  constructor({ registry }: HttpMetricsOptions) {
    const registers = [registry];
    this.requests = new RequestSeries({
      registry,
      counterName: 'ace_http_requests_total',
      counterHelp: 'HTTP requests answered, by route pattern, method and status.',
      histogramName: 'ace_http_request_duration_seconds',
      histogramHelp: 'Time from request to the last byte of the answer.',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56],
    });
    this.tokens = new client.Counter({
      name: 'ace_tokens_issued_total',
      help: 'Token requests by outcome (issued, or the refusal code).',
      labelNames: ['outcome'],
      registers,
      collect: () => this.tokenCounts.flushInto(this.tokens),
    });
    this.forwardedIgnored = new client.Counter({
      name: 'ace_forwarded_for_ignored_total',
      help: 'Requests whose X-Forwarded-For was ignored, by reason: untrusted_peer (the direct peer is not a trusted proxy, TRUST_PROXY_PEERS / TRUST_PROXY_CIDRS: clients reach the service without the proxy), trust_proxy_off (TRUST_PROXY_HOPS=0 and no TRUST_PROXY_CIDRS: a proxy in front is unannounced, every client behind it counts as one address).',
      labelNames: ['reason'],
      registers,
    });
    this.adminAuthFailures = new client.Counter({
      name: 'ace_admin_auth_failures_total',
      help: 'Admin API requests with a missing or wrong bearer token (refusals past the limit count under ace_rate_limit_refusals_total).',
      registers,
    });
    for (const reason of ['untrusted_peer', 'trust_proxy_off'] satisfies ForwardedIgnoredReason[]) this.forwardedIgnored.inc({ reason }, 0);
  }

  /** `method` is one of the known methods or `other` (server.ts knownMethod); checked again here. */
  observeHttp(route: string, method: string, status: number, seconds: number): void {
    if (!HTTP_METHODS.has(method)) method = 'other';
    this.requests.record(route, method, status, seconds);
  }

  /** `outcome` is `issued`, `unavailable` (not a ServiceError) or a catalog code; anything else is counted as `other`. */
  tokenOutcome(outcome: string): void {
    if (outcome !== 'issued' && outcome !== 'unavailable' && !Object.hasOwn(ERRORS, outcome)) outcome = 'other';
    this.tokenCounts.increment(outcome);
  }

  forwardedForIgnored(reason: ForwardedIgnoredReason): void {
    this.forwardedIgnored.inc({ reason });
  }

  adminAuthFailed(): void {
    this.adminAuthFailures.inc();
  }
}
