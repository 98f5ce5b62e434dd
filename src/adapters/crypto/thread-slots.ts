// Which threads of a pool can take a task now: loaded (their module evaluated) and free. A task's deadline
// (ARGON2_TASK_TIMEOUT_MS, SIGN_TASK_TIMEOUT_MS) must bound its run on a thread, never the wait for a
// replacement thread to load its module: a crashed or hung thread's replacement took over a second to load
// on a busy machine, and the task handed to it meanwhile ran out its deadline in Piscina's queue (a 503 for
// work nothing was wrong with).

export interface ThreadSlotsOptions {
  /** The pool's thread count: tasks running at most, fewer while replacements load. */
  readonly threads: number;
}

export class ThreadSlots {
  /** Threads stopped and not yet replaced by a loaded one. */
  private loading = 0;
  private running = 0;
  private waiters: (() => void)[] = [];

  private readonly threads: number;

  constructor({ threads }: ThreadSlotsOptions) {
    this.threads = threads;
  }

  /** A thread was stopped; its replacement is loading. */
  threadStopped(): void {
    this.loading++;
  }

  /** A replacement thread has loaded its module. */
  threadLoaded(): void {
    if (this.loading === 0) return; // the pool's first threads: loadAll() waited for them
    this.loading--;
    this.wake();
  }

  /** Takes a loaded, free thread: true once there is one, false if none came within `timeoutMs`. */
  async take(timeoutMs: number): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    while (this.running >= this.threads - this.loading) {
      const left = deadline - performance.now();
      if (left <= 0) return false;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    this.running++;
    return true;
  }

  release(): void {
    this.running--;
    this.wake();
  }

  private wake(): void {
    const waiting = this.waiters;
    this.waiters = [];
    for (const wake of waiting) wake();
  }
}
