// Requests in flight, for graceful shutdown. Each request completes exactly once, whatever the HTTP core
// calls: uWS may still call `onAborted` after a response ended (it did after `endWithoutBody` with a
// reported length), and a second completion must not count twice.

/** One request's completion: `complete()` is idempotent. */
export interface Completion {
  /** The client went away before the answer (set by the abort handler). */
  aborted: boolean;
  /** True once completed: an answer was sent or the client went away. */
  readonly done: boolean;
  /** Marks the request complete; only the first call counts. Returns whether this call did. */
  complete(): boolean;
}

export class InFlight {
  private count = 0;
  private idleWaiters: (() => void)[] = [];

  get size(): number {
    return this.count;
  }

  begin(): Completion {
    this.count++;
    return new PendingRequest(this);
  }

  /** Called once per request by its Completion. */
  ended(): void {
    this.count--;
    if (this.count === 0 && this.idleWaiters.length > 0) this.idleWaiters.splice(0).forEach((wake) => wake());
  }

  /** Resolves when no request is in flight, or at the deadline. */
  idle(timeoutMs: number): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.idleWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}

/** A class rather than a closure per request: one small object on the hot path. */
class PendingRequest implements Completion {
  aborted = false;
  done = false;
  constructor(private readonly owner: InFlight) {}

  complete(): boolean {
    if (this.done) return false;
    this.done = true;
    this.owner.ended();
    return true;
  }
}
