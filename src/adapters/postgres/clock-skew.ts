// This instance's clock against the database's: `SELECT clock_timestamp()` with the round trip measured
// around it (the database's reading is taken as the round trip's midpoint, so half of it is the error
// bound). Exported as ace_clock_skew_seconds (positive: this instance is ahead). Beyond the bound
// (CLOCK_SKEW_MAX_SECONDS, below REVOCATION_ISSUED_SLACK_SECONDS by default) the instance stops issuing
// tokens until the skew is back within it; only a skew beyond the bound by more than the measurement's
// error counts, so a slow round trip never refuses on its own. A failed reading keeps the last verdict
// (a clock does not drift much while the database is away, and the token path then has Postgres
// trouble of its own).
import client from 'prom-client';
import type { Sql } from 'postgres';
import { withTimeout } from '../../core/support/deadline.js';
import type { IssuingClock } from '../../core/ports/clock.js';

export interface ClockSkewOptions {
  sql: Sql;
  maxSeconds: number;
  timeoutMs: number;
  registry: client.Registry;
  /** Told when the verdict changes (refusing or not), with the measured skew. */
  onVerdict: (refusing: boolean, skewSeconds: number, reason: string | undefined) => void;
  /** Told when a reading fails. */
  onFailure: (error: unknown) => void;
}

export class ClockSkewMonitor implements IssuingClock {
  private readonly gauge: client.Gauge;
  private reason: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly options: ClockSkewOptions) {
    this.gauge = new client.Gauge({
      name: 'ace_clock_skew_seconds',
      help: "This instance's clock minus the database's (positive: ahead), measured every few seconds; beyond CLOCK_SKEW_MAX_SECONDS the instance refuses to issue tokens.",
      registers: [options.registry],
      aggregator: 'max',
    });
  }

  refusal(): string | undefined {
    return this.reason;
  }

  /** One reading; resolves false when the database did not answer in time. */
  async check(): Promise<boolean> {
    const { sql, maxSeconds, timeoutMs } = this.options;
    let skewMs: number;
    let errorMs: number;
    try {
      const before = Date.now();
      const [row] = await withTimeout('postgres', sql`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now`, timeoutMs);
      const after = Date.now();
      skewMs = (before + after) / 2 - Number(row.now);
      errorMs = (after - before) / 2;
    } catch (error) {
      this.options.onFailure(error);
      return false;
    }
    const skewSeconds = Math.round(skewMs) / 1000;
    this.gauge.set(skewSeconds);
    const beyond = Math.abs(skewMs) - errorMs > maxSeconds * 1000;
    const reason = beyond
      ? `this instance's clock is ${Math.abs(skewSeconds)} s ${skewMs > 0 ? 'ahead of' : 'behind'} the database's (CLOCK_SKEW_MAX_SECONDS=${maxSeconds}): tokens it stamped would be refused or slip past revocations`
      : undefined;
    if ((reason === undefined) !== (this.reason === undefined)) this.options.onVerdict(beyond, skewSeconds, reason);
    this.reason = reason;
    return true;
  }

  /** Reads the clocks every `everyMs` until stopped. */
  start(everyMs: number): void {
    const tick = () => {
      if (this.stopped) return;
      this.timer = setTimeout(() => void this.check().finally(tick), everyMs);
      this.timer.unref();
    };
    tick();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
