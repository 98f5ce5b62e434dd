// A bounded waiting line in front of a thread pool. At most `slots` dispatches are in flight (one per
// thread); the rest wait here in arrival order and leave in batches of up to `maxBatch`.
//
// Why not Piscina's own queue: Piscina stops the whole thread when the AbortSignal of a *running* task
// fires. Handing it the client's signal meant every client that hung up during its argon2 check killed an
// argon2 thread (and its ~20 ms of work) and made the pool start a new one: a cheap way to burn the
// service's CPU, and what a fleet's timeouts did under load. Here the client's signal only takes a caller
// out of the line while it waits (its promise rejects at once, so the caller's slots are freed); once
// dispatched, a task runs to its end and its answer is dropped.
//
// The line may stretch (`overflow`): a fresh instance in its warm-up admits, beyond `maxWaiting`, the
// callers the pool can still serve within a bounded wait. Each of those leaves the line with the `full`
// refusal if it has not reached a thread by then, so a client waits at most that long for a refusal it
// would otherwise have got at once.
export type RunBatch<T, R> = (batch: T[]) => Promise<R[]>;

/** Places beyond `maxWaiting`, each with a bound on its wait. */
export interface Overflow {
  /** Callers that may wait beyond `maxWaiting` now (0: none). */
  places: () => number;
  /** A caller admitted beyond `maxWaiting` and still waiting after this long gets `full()`. */
  maxWaitMs: number;
}

export interface WaitingLineOptions<T, R> {
  run: RunBatch<T, R>;
  /** Dispatches in flight at most (one per thread). */
  slots: number;
  /** Callers that may wait while every slot is busy. */
  maxWaiting: number;
  /** The error a caller gets when the line is full (or its overflow wait ran out). */
  full: () => unknown;
  maxBatch?: number;
  overflow?: Overflow;
}

interface Waiting<T, R> {
  item: T;
  signal?: AbortSignal;
  onAbort?: () => void;
  /** Left the line (client gone, or its overflow wait ran out); skipped at dispatch. */
  gone: boolean;
  /** The end of an overflow caller's wait. */
  timer?: NodeJS.Timeout;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

export class WaitingLine<T, R> {
  /** Arrival order; entries before `head` were dispatched or skipped (dropped at a cheap moment, not one by one). */
  private waiting: Waiting<T, R>[] = [];
  private head = 0;
  /** Callers in `waiting` that have not left it. */
  private live = 0;
  private inFlight = 0;

  private readonly runBatch: RunBatch<T, R>;
  private readonly slots: number;
  private readonly maxWaiting: number;
  private readonly full: () => unknown;
  private readonly maxBatch: number;
  private readonly overflow: Overflow | undefined;

  constructor(options: WaitingLineOptions<T, R>) {
    ({ run: this.runBatch, slots: this.slots, maxWaiting: this.maxWaiting, full: this.full, overflow: this.overflow } = options);
    this.maxBatch = options.maxBatch ?? 1;
  }

  /** Callers waiting for a slot. */
  get queued(): number {
    return this.live;
  }

  /** True when a caller arriving now would be refused. */
  get isFull(): boolean {
    return this.inFlight >= this.slots && this.live >= this.maxWaiting + (this.overflow?.places() ?? 0);
  }

  run(item: T, signal?: AbortSignal): Promise<R> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.isFull) return Promise.reject(this.full());
    const overflowing = this.inFlight >= this.slots && this.live >= this.maxWaiting;
    return new Promise<R>((resolve, reject) => {
      const entry: Waiting<T, R> = { item, signal, gone: false, resolve, reject };
      const leave = (reason: unknown) => {
        if (entry.gone) return;
        entry.gone = true;
        this.live--;
        clearTimeout(entry.timer);
        if (entry.onAbort) signal!.removeEventListener('abort', entry.onAbort);
        reject(reason);
      };
      if (signal) {
        entry.onAbort = () => leave(signal.reason);
        signal.addEventListener('abort', entry.onAbort, { once: true });
      }
      if (overflowing) entry.timer = setTimeout(() => leave(this.full()), this.overflow!.maxWaitMs);
      // Callers that left stay in the array until dispatch passes them; bound that while threads are stuck.
      if (this.waiting.length - this.head > 2 * this.live + 64) this.compact((w) => !w.gone);
      this.waiting.push(entry);
      this.live++;
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.slots && this.live > 0) {
      // Share what waits evenly among the free slots, so every thread works on a burst.
      const size = Math.min(this.maxBatch, Math.ceil(this.live / (this.slots - this.inFlight)));
      const batch: Waiting<T, R>[] = [];
      while (batch.length < size && this.head < this.waiting.length) {
        const entry = this.waiting[this.head++];
        if (entry.gone) continue;
        entry.gone = true; // dispatched: no longer in the line, and its signal and wait bound no longer apply
        if (entry.onAbort) entry.signal!.removeEventListener('abort', entry.onAbort);
        clearTimeout(entry.timer);
        batch.push(entry);
      }
      this.live -= batch.length;
      this.inFlight++;
      void this.dispatch(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
    // Dispatched entries and those that left are dropped once nobody live is behind them, or once they
    // are most of the array (no copy per dispatch).
    if (this.live === 0) {
      this.waiting = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.waiting.length) this.compact(() => true);
  }

  /** Drops the dispatched entries, keeping those after `head` that pass `keep`. */
  private compact(keep: (entry: Waiting<T, R>) => boolean): void {
    this.waiting = this.waiting.slice(this.head).filter(keep);
    this.head = 0;
  }

  private async dispatch(batch: Waiting<T, R>[]): Promise<void> {
    try {
      const results = await this.runBatch(batch.map((entry) => entry.item));
      batch.forEach((entry, i) => entry.resolve(results[i]));
    } catch (error) {
      for (const entry of batch) entry.reject(error);
    }
  }
}
