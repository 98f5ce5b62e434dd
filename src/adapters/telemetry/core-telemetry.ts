// The core's telemetry events as metrics and logs: one place decides what each event becomes. The
// credential checks, client assertions and background failures are series of their own; verified-secret
// look-ups and rate-limit refusals go to the series the cache and rate-limit adapters declare.
import client from 'prom-client';
import type { LimiterName, Telemetry, TelemetryEvent } from '../../core/ports/telemetry.js';
import type { Logger } from './logger.js';

const FAILURE_MESSAGES = {
  key_refresh: 'signing key refresh failed',
  key_rotation: 'scheduled signing key rotation failed',
  revocation_push: 'revocation feed push failed',
  revocation_purge: 'revocation purge failed',
  admin_after_commit: 'an invalidation after a committed admin change failed (caches expire by TTL)',
  listing_enrichment: 'platform metadata for a listing could not be read; answered without it',
  feed_credentials_reload: 'reloading the revocation feed credentials failed (tried again by the next check)',
  client_keys_reload: 'reloading the agents\' client keys or the trusted workload issuers failed (checks of what it concerns answer 503 until it succeeds)',
  clock_skew_check: "reading the database's clock failed (the last clock-skew verdict stands until a reading succeeds)",
  used_jti_prune: 'deleting expired used assertion jtis failed (they no longer count; retried on the next turn)',
} as const;

export interface CoreTelemetryOptions {
  registry: client.Registry;
  logger: Logger;
  /** ace_cache_requests_total (the cache adapter's CacheMetrics). */
  cache: { cache(cache: 'verified' | 'verified_shared', hit: boolean): void };
  /** ace_rate_limit_refusals_total (the rate-limit adapter's RateLimitMetrics). */
  rateLimits: { rateLimited(limiter: LimiterName): void };
}

export class CoreTelemetry implements Telemetry {
  private readonly credentialChecks: client.Counter;
  private readonly clientAssertions: client.Counter<'method' | 'outcome'>;
  private readonly backgroundFailures: client.Counter<'task'>;

  constructor(private readonly options: CoreTelemetryOptions) {
    const registers = [options.registry];
    this.credentialChecks = new client.Counter({
      name: 'ace_credential_checks_total',
      help: 'Credential checks run in the argon2 pool (each verifies one hash; two only for hashes older than the secret hint), successful or not.',
      registers,
    });
    this.clientAssertions = new client.Counter({
      name: 'ace_client_assertions_total',
      help: 'Client assertions checked (private_key_jwt, workload identity tokens), by method and outcome: accepted, or the reason of a refusal (the client is only ever told invalid_client).',
      labelNames: ['method', 'outcome'],
      registers,
    });
    this.backgroundFailures = new client.Counter({
      name: 'ace_background_failures_total',
      help: 'Work that failed without failing a request and is retried on its next turn (signing-key refresh and rotation, revocation push and purge, invalidation after a commit, listing enrichment), by task.',
      labelNames: ['task'],
      registers,
    });
  }

  record(event: TelemetryEvent): void {
    switch (event.type) {
      case 'verified_memory':
        return this.options.cache.cache('verified', event.hit);
      case 'verified_shared':
        return this.options.cache.cache('verified_shared', event.hit);
      case 'credential_checked':
        return this.credentialChecks.inc();
      case 'client_assertion':
        return this.clientAssertions.inc({ method: event.method, outcome: event.outcome });
      case 'rate_limited':
        return this.options.rateLimits.rateLimited(event.limiter);
      case 'background_failure':
        this.backgroundFailures.inc({ task: event.what });
        // Only the message: errors of the stores carry no secret, but a stack or a cause might.
        this.options.logger.warn({ err: { message: (event.error as Error)?.message } }, FAILURE_MESSAGES[event.what]);
        return;
    }
  }
}
