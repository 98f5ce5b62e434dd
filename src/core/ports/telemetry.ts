// What the core reports, as typed events: the telemetry adapter turns them into metrics (and logs).
// The core never sees a metric, a label or a logger.

export type LimiterName = 'token_per_key' | 'auth_fail_per_address' | 'auth_pending_per_address' | 'argon2_share_per_address';

export type TelemetryEvent =
  /** The verified-secret memory answered (hit) or not. */
  | { type: 'verified_memory'; hit: boolean }
  /** The shared verified-secret memory (Redis) was asked about a secret the process did not remember. */
  | { type: 'verified_shared'; hit: boolean }
  /** One argon2 credential check ran (a task refused by a full queue did not). */
  | { type: 'credential_checked' }
  /** A client assertion (private_key_jwt or a workload token) was accepted or refused, and why (never sent to the client). */
  | { type: 'client_assertion'; method: 'private_key_jwt' | 'workload'; outcome: 'accepted' | string }
  | { type: 'rate_limited'; limiter: LimiterName }
  /** Background work failed and will be tried again (key refresh, revocation push); `what` is a fixed name. */
  | { type: 'background_failure'; what: BackgroundTask; error: unknown };

/**
 * Work that may fail without failing the request it serves, tried again next time: `listing_enrichment` is
 * the platform metadata a listing answers without when its read fails; `feed_credentials_reload` the
 * revocation feed credentials re-read after a change (checks answer 503 until it succeeds).
 */
export type BackgroundTask =
  | 'key_refresh'
  | 'key_rotation'
  | 'revocation_push'
  | 'revocation_purge'
  | 'admin_after_commit'
  | 'listing_enrichment'
  | 'feed_credentials_reload'
  | 'client_keys_reload'
  | 'clock_skew_check'
  | 'used_jti_prune';

export interface Telemetry {
  record(event: TelemetryEvent): void;
}

export const NO_TELEMETRY: Telemetry = { record: () => {} };
