// The refusals of every rate limit (429), by limiter.
import client from 'prom-client';
import type { LimiterName } from './limiters.js';

/** The limiters of token requests, and the admin API's failed-bearer limit. */
export type RefusingLimiter = LimiterName | 'admin_auth_fail_per_address';

export interface RateLimitMetricsOptions {
  registry: client.Registry;
}

export class RateLimitMetrics {
  private readonly refusals: client.Counter<'limiter'>;

  constructor({ registry }: RateLimitMetricsOptions) {
    this.refusals = new client.Counter({
      name: 'ace_rate_limit_refusals_total',
      help: 'Requests refused with 429, by limiter.',
      labelNames: ['limiter'],
      registers: [registry],
    });
    // Pre-created so dashboards and ratios see zeros instead of gaps.
    for (const limiter of ['token_per_key', 'auth_fail_per_address', 'auth_pending_per_address', 'argon2_share_per_address', 'admin_auth_fail_per_address'] satisfies RefusingLimiter[]) {
      this.refusals.inc({ limiter }, 0);
    }
  }

  rateLimited(limiter: RefusingLimiter): void {
    this.refusals.inc({ limiter });
  }
}
