// The audit trail's storage interface (Postgres implements it: adapters/postgres/audit-store.ts).
import type { AuditEvent, EventType } from '../audit/events.js';

export interface EventQuery {
  types: EventType[];
  agentId?: string;
  platformId?: string;
  /** Inclusive, ms since the epoch. */
  since?: number;
  /** Exclusive, ms since the epoch. */
  until?: number;
  limit: number;
  /** Position after which to read: the (at, id) of the last event of the previous page. */
  after?: { at: number; id: string };
}

export interface MaintenanceResult {
  created: string[];
  dropped: string[];
  /** Rows deleted from the default partition (events outside every daily partition). */
  deleted: number;
}

export interface AuditStore {
  /** Inserts in one statement; events already present (same at and id) are skipped. Returns rows inserted. */
  insert(events: AuditEvent[]): Promise<number>;
  /** Oldest first; `limit` rows at most. */
  list(query: EventQuery): Promise<AuditEvent[]>;
  /**
   * Creates the daily partitions around `now` and drops those older than the retention, under a
   * try-lock: returns undefined at once when another replica is doing it.
   */
  maintain(now: Date, retentionDays: number, daysAhead: number): Promise<MaintenanceResult | undefined>;
  ping(): Promise<void>;
  close(): Promise<void>;
}
