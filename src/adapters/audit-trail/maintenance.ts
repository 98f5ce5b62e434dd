// Daily partitions and retention of the audit trail: at start and then every
// AUDIT_MAINTENANCE_INTERVAL_SECONDS, create the partitions of yesterday to two days ahead and drop the
// partitions older than AUDIT_RETENTION_DAYS. Every replica runs the timer; a Postgres try-lock lets
// one of them do the work at a time and the others skip that round.
import type { AuditStore, MaintenanceResult } from '../../core/ports/audit-store.js';

export const DAYS_AHEAD = 2;

export interface AuditMaintenanceOptions {
  store: AuditStore;
  /** AUDIT_RETENTION_DAYS: older partitions are dropped. */
  retentionDays: number;
  intervalMs: number;
  /** Told of each round's result, or of its failure. */
  onResult: (result: MaintenanceResult | undefined, error?: unknown) => void;
}

export class AuditMaintenance {
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: AuditMaintenanceOptions) {}

  async runOnce(now = new Date()): Promise<MaintenanceResult | undefined> {
    try {
      const result = await this.options.store.maintain(now, this.options.retentionDays, DAYS_AHEAD);
      this.options.onResult(result);
      return result;
    } catch (error) {
      this.options.onResult(undefined, error);
      return undefined;
    }
  }

  start(): void {
    this.timer = setInterval(() => void this.runOnce(), this.options.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }
}
