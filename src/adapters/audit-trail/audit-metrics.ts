// The audit trail's series: events made durable (Postgres or the spool), batch sizes, events nothing
// took, the spool's depth, and how long the trail has spooled or refused.
import client from 'prom-client';
import { StateDuration } from '../telemetry/index.js';

export type AuditSinkName = 'postgres' | 'spool';

export interface AuditMetricsOptions {
  registry: client.Registry;
}

export class AuditMetrics {
  private readonly written: client.Counter<'sink'>;
  private readonly batch: client.Histogram;
  private readonly failed: client.Counter;
  private readonly spool: client.Gauge;
  private readonly spooling: StateDuration;
  private readonly refusing: StateDuration;

  constructor({ registry }: AuditMetricsOptions) {
    const registers = [registry];
    this.written = new client.Counter({
      name: 'ace_audit_events_written_total',
      help: 'Audit events made durable, by where: postgres, or the local spool while Postgres is unreachable.',
      labelNames: ['sink'],
      registers,
    });
    this.batch = new client.Histogram({
      name: 'ace_audit_batch_size',
      help: 'Audit events per group-commit batch (one INSERT statement or one spool write).',
      buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000],
      registers,
    });
    this.failed = new client.Counter({
      name: 'ace_audit_write_failures_total',
      help: 'Audit events neither Postgres nor the spool could take (their token requests got 503).',
      registers,
    });
    this.spool = new client.Gauge({
      name: 'ace_audit_spool_events',
      help: 'Audit events waiting in the local spool for Postgres.',
      registers,
    });
    // The states the state-based alert rules watch, each as how long it has lasted (state-duration.ts).
    this.spooling = new StateDuration({
      name: 'ace_audit_spooling_seconds',
      help: 'How long audit events have gone to the local spool instead of Postgres, or waited there to be drained, in seconds; 0 when not.',
      registers,
    });
    this.refusing = new StateDuration({
      name: 'ace_audit_refusing_seconds',
      help: 'How long neither Postgres nor the spool has taken an audit batch, in seconds (token requests answer 503 until one is written); 0 when not.',
      registers,
    });
    this.spooling.set(false);
    this.refusing.set(false);
    for (const sink of ['postgres', 'spool'] satisfies AuditSinkName[]) this.written.inc({ sink }, 0);
  }

  auditWrittenTo(sink: AuditSinkName, events: number): void {
    this.written.inc({ sink }, events);
  }

  auditBatchSize(size: number): void {
    this.batch.observe(size);
  }

  auditWriteFailed(events: number): void {
    this.failed.inc(events);
  }

  auditSpoolDepth(depth: number): void {
    this.spool.set(depth);
  }

  /** The trail sends batches to the spool, or the spool still holds events to drain. */
  setAuditSpooling(spooling: boolean): void {
    this.spooling.set(spooling);
  }

  /** The last audit batch was taken by neither Postgres nor the spool (its requests were refused). */
  setAuditRefusing(refusing: boolean): void {
    this.refusing.set(refusing);
  }
}
