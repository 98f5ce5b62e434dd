// The readiness check's log: what a still-ready instance serves without, and why one is not ready.
import type { Logger } from '../adapters/telemetry/logger.js';
import type { DegradedComponent } from '../adapters/telemetry/index.js';

/** What else keeps an instance out of rotation (stores aside): each one named in the log. */
export type NotReadyBecause = 'worker_pools' | 'signing_key' | 'redis_never_reached' | 'clock_skew';

/**
 * Says once, when it changes, which components a still-ready instance serves without, and why an instance
 * that is not ready (draining aside) is not: an operator, or a test harness, reads the reason in the log.
 */
export interface DegradationLogOptions {
  readonly logger: Logger;
}

/** What each reason means, in the warning line. */
const WHY: Record<DegradedComponent | NotReadyBecause, string> = {
  postgres: 'Postgres: no writable primary (tokens of warm agents come from the caches, audit events go to the spool; cold credentials and admin calls get 503)',
  redis: 'Redis: not answering (caches and limits are per process; Postgres answers)',
  worker_pools: 'the argon2 or signing worker pool did not answer a ping within 1 s',
  signing_key: 'no active signing key',
  redis_never_reached: 'the Redis it was told to use has not been reached and verified yet',
  clock_skew: "this instance's clock is beyond CLOCK_SKEW_MAX_SECONDS from the database's: it refuses every token (503)",
};

/** What came back, in the recovery line. */
const BACK: Record<DegradedComponent | NotReadyBecause, string> = {
  postgres: 'Postgres has a writable primary again',
  redis: 'Redis answers again',
  worker_pools: 'the worker pools answer again',
  signing_key: 'a signing key is active again',
  redis_never_reached: 'Redis reached and verified',
  clock_skew: "this instance's clock is back within CLOCK_SKEW_MAX_SECONDS",
};

export class DegradationLog {
  private last = '';
  private lastReasons: (DegradedComponent | NotReadyBecause)[] = [];
  private readonly logger: Logger;

  constructor({ logger }: DegradationLogOptions) {
    this.logger = logger;
  }

  report(down: DegradedComponent[], ready: boolean, because: NotReadyBecause[] = []): void {
    const now = `${down.join(',')}|${ready}|${because.join(',')}`;
    if (now === this.last) return;
    const first = this.last === '';
    const recovered = this.lastReasons;
    this.last = now;
    this.lastReasons = [...down, ...because];
    if (down.length === 0 && because.length === 0) {
      // Names what came back: a worker pool that answers again is not "every store answers".
      if (!first) this.logger.info({ recovered }, `no longer degraded: ${recovered.map((c) => BACK[c]).join('; ')}`);
      return;
    }
    const reasons = [...down, ...because].map((c) => WHY[c]).join('; ');
    this.logger.warn({ down, ...(because.length > 0 ? { because } : {}), ready }, `${ready ? 'degraded, still ready' : 'not ready'}: ${reasons}`);
  }
}
