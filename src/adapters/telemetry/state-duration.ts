// How long a state has lasted, as a gauge read at each scrape: seconds since the state began while it
// holds, 0 otherwise. Alert rules compare it with a bound (`ace_store_unavailable_seconds >= 20`), so they
// fire a fixed time after the state began however scrapes and rule evaluations fall (a `for:` clause
// starts counting only at the first evaluation that sees the state, and starts over after a missed
// scrape), and resolve at the first scrape after it ends. Measured on the monotonic clock: a pod whose
// wall clock is off still reports the right duration.
import client from 'prom-client';

export interface StateDurationOptions<Label extends string> {
  name: string;
  help: string;
  labelNames?: Label[];
  registers: client.Registry[];
  /** The monotonic clock in milliseconds (performance.now() unless a test sets it). */
  now?: () => number;
}

export class StateDuration<Label extends string = string> {
  /** Start (performance.now()) of each label set's current state; absent or undefined when it does not hold. */
  private readonly started = new Map<string, { labels: Partial<Record<Label, string>>; since: number | undefined }>();

  private readonly now: () => number;

  constructor({ now = () => performance.now(), labelNames = [], ...gauge }: StateDurationOptions<Label>) {
    this.now = now;
    const self = this;
    new client.Gauge<Label>({
      ...gauge,
      labelNames,
      aggregator: 'max', // cluster mode: the longest among the pod's processes
      collect() {
        const now = self.now();
        for (const { labels, since } of self.started.values()) this.set(labels, since === undefined ? 0 : Math.floor((now - since) / 1000));
      },
    });
  }

  /** Records whether the state holds now; a state reported again keeps its first start. */
  set(active: boolean, labels: Partial<Record<Label, string>> = {}): void {
    const key = JSON.stringify(labels);
    const entry = this.started.get(key);
    if (!entry) this.started.set(key, { labels, since: active ? this.now() : undefined });
    else if (active) entry.since ??= this.now();
    else entry.since = undefined;
  }
}
