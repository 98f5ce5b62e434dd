// The core's telemetry events as metrics and logs: one place decides what each event becomes.
import type { Telemetry, TelemetryEvent } from '../../core/ports/telemetry.js';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';

const FAILURE_MESSAGES = {
  key_refresh: 'signing key refresh failed',
  key_rotation: 'scheduled signing key rotation failed',
  revocation_push: 'revocation feed push failed',
  revocation_purge: 'revocation purge failed',
  admin_after_commit: 'an invalidation after a committed admin change failed (caches expire by TTL)',
  listing_enrichment: 'platform metadata for a listing could not be read; answered without it',
  feed_credentials_reload: 'reloading the revocation feed credentials failed (tried again by the next check)',
  client_keys_reload: 'reloading the agents\' client keys or the trusted workload issuers failed (checks of what it concerns answer 503 until it succeeds)',
} as const;

export class CoreTelemetry implements Telemetry {
  constructor(
    private readonly metrics: Metrics,
    private readonly logger: Logger,
  ) {}

  record(event: TelemetryEvent): void {
    switch (event.type) {
      case 'verified_memory':
        return this.metrics.cache('verified', event.hit);
      case 'credential_checked':
        return this.metrics.credentialChecked();
      case 'client_assertion':
        return this.metrics.clientAssertion(event.method, event.outcome);
      case 'rate_limited':
        return this.metrics.rateLimited(event.limiter);
      case 'background_failure':
        this.metrics.backgroundFailure(event.what);
        // Only the message: errors of the stores carry no secret, but a stack or a cause might.
        this.logger.warn({ err: { message: (event.error as Error)?.message } }, FAILURE_MESSAGES[event.what]);
        return;
    }
  }
}
