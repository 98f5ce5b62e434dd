// Wiring of the audit trail for one service process: its own small Postgres pool (so a hung audit write
// never holds a connection the token path needs), the spool in DATA_DIR, group commit, and partition
// maintenance with retention.
import type { AuditConfig } from '../config/config.js';
import type { Logger } from '../adapters/telemetry/logger.js';
import type { AuditMetrics } from '../adapters/audit-trail/audit-metrics.js';
import { NO_AUDIT, type AuditSink } from '../core/audit/events.js';
import { connectPostgres } from '../adapters/postgres/connect.js';
import { PostgresAuditStore } from '../adapters/postgres/audit-store.js';
import type { AuditStore } from '../core/ports/audit-store.js';
import { AuditMaintenance } from '../adapters/audit-trail/maintenance.js';
import { Spool } from '../adapters/audit-trail/spool.js';
import { AuditTrail } from '../adapters/audit-trail/trail.js';
import { RefusalRecorder } from '../adapters/audit-trail/refusals.js';

export interface RunningAudit {
  /**
   * The one entrance of every event into the trail (the core's token.issued and token.refused, admin and
   * key events, listings): token.refused bounded per address and agent (refusals.ts), the rest as is.
   */
  sink: AuditSink;
  store: AuditStore;
  trail: AuditTrail | undefined;
  /** `drainWithinMs`: how long the spool may take to drain into Postgres before the process exits. */
  close(options?: { drainWithinMs?: number }): Promise<void>;
}

export async function startAudit(options: {
  config: AuditConfig;
  databaseUrl: string;
  embedded: boolean;
  /** STORE_TIMEOUT_MS: bound on reads of the trail. */
  readTimeoutMs: number;
  dataDir: string;
  logger: Logger;
  metrics: AuditMetrics;
}): Promise<RunningAudit> {
  const { config, logger, metrics } = options;
  // PGlite runs one statement at a time and its socket server takes few connections.
  const poolSize = options.embedded ? Math.min(2, config.poolSize) : config.poolSize;
  const sql = connectPostgres({ url: options.databaseUrl, poolSize, timeoutMs: config.writeTimeoutMs, embedded: options.embedded });
  const store = new PostgresAuditStore({ sql, readTimeoutMs: options.readTimeoutMs });

  const maintenance = new AuditMaintenance({
    store,
    retentionDays: config.retentionDays,
    intervalMs: config.maintenanceIntervalSeconds * 1000,
    onResult: (result, error) => {
      if (error) logger.warn({ err: { message: (error as Error).message } }, 'audit partition maintenance failed');
      else if (result && (result.created.length || result.dropped.length || result.deleted)) {
        logger.info({ created: result.created, dropped: result.dropped, deleted: result.deleted }, 'audit partitions maintained');
      }
    },
  });
  await maintenance.runOnce();
  maintenance.start();

  if (!config.enabled) {
    logger.warn('AUDIT=off: no audit event is recorded');
    return {
      sink: NO_AUDIT,
      store,
      trail: undefined,
      async close() {
        maintenance.stop();
        await store.close();
      },
    };
  }

  const spool = new Spool({ dataDir: options.dataDir, maxBytes: config.spoolMaxBytes });
  const trail = new AuditTrail({
    store,
    spool,
    flushMs: config.flushMs,
    batchMax: config.batchMax,
    maxInFlight: config.maxInFlight,
    writeTimeoutMs: config.writeTimeoutMs,
    drainIntervalMs: config.drainIntervalMs,
    observer: {
      written: (sink, events) => metrics.auditWrittenTo(sink, events),
      batch: (size) => metrics.auditBatchSize(size),
      failed: (events, error) => {
        metrics.auditWriteFailed(events);
        logger.error({ err: { message: (error as Error).message }, events }, 'audit: events could not be written to Postgres nor to the spool, or a spool drain round failed');
      },
      spoolDepth: (depth) => metrics.auditSpoolDepth(depth),
      spooling: (spooling) => metrics.setAuditSpooling(spooling),
      refusing: (refusing) => metrics.setAuditRefusing(refusing),
      postgresDown: (error) =>
        logger.warn({ err: { message: (error as Error).message } }, 'audit: Postgres did not take a batch; spooling to DATA_DIR/audit-spool until it answers'),
      drained: (events) => logger.info({ events }, 'audit: spooled events drained into Postgres'),
      leftInSpool: (events, withinMs) =>
        logger.error(
          { events, within_ms: withinMs, spool: spool.dir },
          'audit: exiting with events still in the spool (Postgres did not take them in time); a process started on the same DATA_DIR drains them, deleting the volume loses them',
        ),
    },
  });
  trail.start();
  const sink = new RefusalRecorder({ sink: trail, bounds: { perWindow: config.refusalsPerWindow, windowSeconds: config.refusalWindowSeconds } });
  // Once: the shutdown drains the trail within its budget, and the cleanups close it again after.
  let closing: Promise<void> | undefined;
  return {
    sink,
    store,
    trail,
    close(closeOptions) {
      closing ??= (async () => {
        maintenance.stop();
        // The refusal window's aggregates go into the trail before it closes.
        sink.close();
        await trail.close(closeOptions);
        await store.close();
      })();
      return closing;
    },
  };
}
