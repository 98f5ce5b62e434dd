// Group commit of audit events. Requests hand their events to the trail and wait; the trail writes
// whatever has gathered in one INSERT (at most AUDIT_BATCH_MAX rows, at most AUDIT_MAX_IN_FLIGHT
// statements at a time, the first one starting AUDIT_FLUSH_MS after its first event) and releases every
// waiter of the batch when it commits. So a token is answered only once its token.issued event is
// durable, at the price of a few milliseconds, not of one commit per request.
//
// When Postgres does not take a batch (down, refusing, or slower than AUDIT_WRITE_TIMEOUT_MS), the batch
// goes to the local spool (fsync'd) instead and the trail stays in spool mode: later batches skip
// Postgres until a probe succeeds, then the spool is drained into Postgres. When the spool cannot take
// a batch either (full, disk error), its waiters are refused: the token endpoint answers 503.
import type { AuditEvent, AuditSink } from '../../core/audit/events.js';
import type { AuditStore } from '../../core/ports/audit-store.js';
import { withTimeout } from '../../core/support/deadline.js';
import { StoreUnavailableError } from '../../core/errors.js';
import type { Spool } from './spool.js';

/** The AUDIT_* settings of group commit and spooling. */
export interface TrailSettings {
  flushMs: number;
  /**
   * Under load (the last batch held more than one event), a batch may wait, after the writer is free, for
   * twice as many events as the last one held: at most four times as long as the last write took, and at most
   * this long (ms): group commit that grows with load (AUDIT_FLUSH_MAX_MS; 0 or absent: never beyond flushMs).
   */
  lingerMs?: number;
  batchMax: number;
  maxInFlight: number;
  writeTimeoutMs: number;
  /** How often a trail in spool mode probes Postgres (and drains when it answers). */
  drainIntervalMs: number;
}

export interface TrailObserver {
  written(sink: 'postgres' | 'spool', events: number): void;
  batch(size: number): void;
  failed(events: number, error: unknown): void;
  spoolDepth(depth: number): void;
  /** Batches go to the spool, or it holds events not yet drained (true); neither (false). */
  spooling(spooling: boolean): void;
  /** The last batch was taken by neither Postgres nor the spool (true), or a later one was written (false). */
  refusing(refusing: boolean): void;
  postgresDown(error: unknown): void;
  drained(events: number): void;
  /** At close: events still in the spool after the final drain (Postgres did not take them in time). */
  leftInSpool(events: number, withinMs: number): void;
}

export interface AuditTrailOptions extends TrailSettings {
  store: AuditStore;
  /** Takes the batches Postgres does not, until they can be drained into it. */
  spool: Spool;
  observer: TrailObserver;
}

interface Pending {
  event: AuditEvent;
  resolve: () => void;
  reject: (error: unknown) => void;
}

const DRAIN_CHUNK = 1000;

export class AuditTrail implements AuditSink {
  private queue: Pending[] = [];
  private inFlight = 0;
  private timer: { cancel: (handle: never) => void; handle: unknown } | undefined;
  private mode: 'postgres' | 'spool' = 'postgres';
  private draining: Promise<void> | undefined;
  private drainTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Events in the last batch sent; more than one means load (see lingerMs). */
  private lastBatch = 0;
  /** Since when (performance.now) the writer could take the batch now gathering: the wait counts from it. */
  private readySince = 0;
  /** How long the last write took (ms): under load a batch waits at most four times that. */
  private lastWriteMs = 0;

  private readonly store: AuditStore;
  private readonly spool: Spool;
  private readonly settings: TrailSettings;
  private readonly observer: TrailObserver;

  constructor({ store, spool, observer, ...settings }: AuditTrailOptions) {
    this.store = store;
    this.spool = spool;
    this.settings = settings;
    this.observer = observer;
  }

  /** Drains what earlier processes left in the spool, then keeps draining whenever spool mode ends. */
  start(): void {
    // A failed round (a disk error while sealing, say) is reported and retried; it must never become an
    // unhandled rejection, which would end the process.
    const round = () => this.drain().catch((error) => this.observer.failed(0, error));
    const tick = () => {
      if (this.closed) return;
      this.drainTimer = setTimeout(() => void round().finally(tick), this.settings.drainIntervalMs);
      this.drainTimer.unref();
    };
    void round().finally(tick);
  }

  get spooling(): boolean {
    return this.mode === 'spool';
  }

  record(event: AuditEvent): Promise<void> {
    if (this.closed) return Promise.reject(new Error('audit trail closed'));
    return new Promise((resolve, reject) => {
      this.enqueue({ event, resolve, reject });
    });
  }

  /** Fire and forget: nobody waits, so a batch that fails is reported by the observer (write) alone. */
  emit(event: AuditEvent): void {
    if (this.closed) return this.observer.failed(1, new Error('audit trail closed'));
    this.enqueue({ event, resolve: () => undefined, reject: () => undefined });
  }

  private enqueue(pending: Pending): void {
    if (this.queue.length === 0 && this.inFlight < this.settings.maxInFlight) this.readySince = performance.now();
    this.queue.push(pending);
    this.schedule();
  }

  /** Under load, the batch a free writer waits for (twice the last one), else 0. */
  private target(): number {
    return this.settings.lingerMs && this.lastBatch > 1 ? Math.min(this.settings.batchMax, 2 * this.lastBatch) : 0;
  }

  private schedule(): void {
    if (this.inFlight >= this.settings.maxInFlight) return; // a finishing flush picks the queue up
    if (this.queue.length >= this.settings.batchMax) return this.fire();
    const target = this.target();
    if (target > 0 && this.queue.length >= target) return this.fire();
    if (this.timer) return;
    // AUDIT_FLUSH_MS=0: still gather what the current turn of the event loop adds.
    this.timer =
      this.settings.flushMs === 0
        ? { cancel: clearImmediate, handle: setImmediate(() => this.flushDue()) }
        : { cancel: clearTimeout, handle: setTimeout(() => this.flushDue(), this.settings.flushMs) };
  }

  /**
   * Events that gathered during a write have waited a whole statement already: no flush delay for them. They
   * leave when it commits, unless under load they may still wait for the target (flushDue's bound).
   */
  private afterWrite(): void {
    if (this.queue.length === 0 || this.inFlight >= this.settings.maxInFlight) return;
    if (this.queue.length >= this.settings.batchMax) return this.fire();
    if (this.timer) {
      this.timer.cancel(this.timer.handle as never);
      this.timer = undefined;
    }
    this.flushDue();
  }

  /** flushMs has passed: the batch leaves, unless under load it may still wait for its target. */
  private flushDue(): void {
    this.timer = undefined;
    const left = this.readySince + Math.min(this.settings.lingerMs ?? 0, 4 * this.lastWriteMs) - performance.now();
    if (this.queue.length < this.target() && left >= 1) {
      this.timer = { cancel: clearTimeout, handle: setTimeout(() => this.fire(), left) };
      return;
    }
    this.fire();
  }

  private fire(): void {
    if (this.timer) {
      this.timer.cancel(this.timer.handle as never);
      this.timer = undefined;
    }
    while (this.queue.length > 0 && this.inFlight < this.settings.maxInFlight) {
      const batch = this.queue.splice(0, this.settings.batchMax);
      this.lastBatch = batch.length;
      this.inFlight++;
      const started = performance.now();
      void this.write(batch).finally(() => {
        this.inFlight--;
        this.readySince = performance.now();
        this.lastWriteMs = this.readySince - started;
        this.afterWrite();
      });
      // Only a full batch justifies a second statement at once; otherwise let the next one gather.
      if (this.queue.length < this.settings.batchMax) break;
    }
  }

  private async write(batch: Pending[]): Promise<void> {
    const events = batch.map((p) => p.event);
    this.observer.batch(events.length);
    if (this.mode === 'postgres') {
      try {
        await withTimeout('postgres', this.store.insert(events), this.settings.writeTimeoutMs);
        this.observer.written('postgres', events.length);
        this.observer.refusing(false);
        batch.forEach((p) => p.resolve());
        return;
      } catch (error) {
        // Unknown outcome (it may still commit): the spool copy keeps the same ids, so no duplicate.
        this.enterSpoolMode(error);
      }
    }
    try {
      await this.spool.append(events);
      this.observer.written('spool', events.length);
      this.observer.spoolDepth(this.spool.depth);
      this.observer.refusing(false);
      batch.forEach((p) => p.resolve());
    } catch (error) {
      this.observer.failed(events.length, error);
      this.observer.refusing(true);
      batch.forEach((p) => p.reject(error));
    }
  }

  private enterSpoolMode(error: unknown): void {
    if (this.mode === 'spool') return;
    this.mode = 'spool';
    this.observer.spooling(true);
    this.observer.postgresDown(error);
  }

  /** Probes Postgres when spooling; when it answers, seals the spool and drains every drainable segment. */
  drain(): Promise<void> {
    this.draining ??= this.drainOnce().finally(() => (this.draining = undefined));
    return this.draining;
  }

  private async drainOnce(): Promise<void> {
    try {
      await this.drainRound();
    } finally {
      this.observer.spooling(this.mode === 'spool' || this.spool.depth > 0);
    }
  }

  private async drainRound(): Promise<void> {
    if (this.mode === 'spool') {
      // The store's ping proves it takes writes (a standby answering SELECT 1 is not "back").
      if (!(await this.postgresAnswers())) return;
      // New batches go to Postgres again; what the spool holds is drained below.
      this.mode = 'postgres';
    }
    // Also seals a segment that a batch begun before the switch appended to afterwards.
    await this.spool.seal();
    for (const segment of this.spool.claimDrainable()) {
      let events: AuditEvent[];
      try {
        events = await this.spool.read(segment);
      } catch (error) {
        this.observer.failed(0, error); // unreadable now (a disk error): the segment stays and is tried next round
        continue;
      }
      if (segment.claimed) this.spool.counted(segment, events.length);
      try {
        await this.drainSegment(events);
      } catch (error) {
        this.enterSpoolMode(error);
        return; // the segment stays; drained again (idempotently) next time
      }
      // Every event of the segment is committed (or kept in the rejected file): only now may it go.
      await this.spool.remove(segment);
      this.observer.drained(events.length);
      this.observer.spoolDepth(this.spool.depth);
    }
  }

  /**
   * Inserts every event of a segment, or throws. A chunk Postgres refuses while it takes writes holds a
   * damaged line: its events are inserted one by one, and only an event refused for itself (not for a
   * connection, a failover or a read-only server) is set aside in the spool's rejected file, never dropped.
   */
  private async drainSegment(events: AuditEvent[]): Promise<void> {
    const timeout = Math.max(this.settings.writeTimeoutMs, 5000);
    const insert = (chunk: AuditEvent[]) => withTimeout('postgres', this.store.insert(chunk), timeout);
    for (let i = 0; i < events.length; i += DRAIN_CHUNK) {
      const chunk = events.slice(i, i + DRAIN_CHUNK);
      try {
        await insert(chunk);
        continue;
      } catch (error) {
        if (!(await this.refusedForItself(error))) throw error;
      }
      const rejected: AuditEvent[] = [];
      for (const event of chunk) {
        try {
          await insert([event]);
        } catch (error) {
          if (!(await this.refusedForItself(error))) throw error;
          rejected.push(event);
        }
      }
      if (rejected.length > 0) {
        await this.spool.reject(rejected);
        this.observer.failed(rejected.length, new Error(`Postgres refused ${rejected.length} spooled event(s); kept in ${this.spool.rejectedPath}`));
      }
    }
  }

  /** The statement itself was refused: not a store outage, and Postgres answers and takes writes. */
  private async refusedForItself(error: unknown): Promise<boolean> {
    if (error instanceof StoreUnavailableError) return false;
    return this.postgresAnswers();
  }

  private postgresAnswers(): Promise<boolean> {
    return withTimeout('postgres', this.store.ping(), this.settings.writeTimeoutMs).then(
      () => true,
      () => false,
    );
  }

  /**
   * Writes what is queued, then drains the spool into Postgres for at most `drainWithinMs` (retrying while
   * Postgres is still out), so a stopping process leaves nothing spooled that Postgres could take; what is
   * left is reported (a successor on the same DATA_DIR drains it; a deleted pod's volume loses it).
   */
  async close({ drainWithinMs = 0 }: { drainWithinMs?: number } = {}): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.drainTimer) clearTimeout(this.drainTimer);
    while (this.queue.length > 0 || this.inFlight > 0) {
      this.fire();
      await new Promise((r) => setTimeout(r, 5));
    }
    await this.draining;
    const deadline = Date.now() + drainWithinMs;
    while (this.hasSpooled() && Date.now() < deadline) {
      const left = deadline - Date.now();
      let timer: NodeJS.Timeout | undefined;
      // A round cut by the deadline keeps its segment: drained again (idempotently) by a successor.
      await Promise.race([this.drain().catch((error) => this.observer.failed(0, error)), new Promise((r) => (timer = setTimeout(r, left)))]);
      clearTimeout(timer);
      if (this.hasSpooled() && Date.now() < deadline) await new Promise((r) => setTimeout(r, Math.min(200, this.settings.drainIntervalMs, Math.max(0, deadline - Date.now()))));
    }
    if (this.hasSpooled()) this.observer.leftInSpool(this.spool.depth, drainWithinMs);
    await this.spool.close();
  }

  /** Events this process still holds in the spool, or segments it has not drained yet. */
  private hasSpooled(): boolean {
    return this.mode === 'spool' || this.spool.depth > 0;
  }
}
