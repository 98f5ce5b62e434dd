// Increments of a labelled counter kept as plain numbers and added to the counter when it is scraped (its
// collect hook). prom-client validates and hashes the label object on every inc, even through a bound child;
// for counters bumped on every request that is a measurable share of a request (request-series.ts).
import type client from 'prom-client';

interface Slot {
  labels: Record<string, string>;
  count: number;
}

export interface PendingCountsOptions<Name extends string> {
  /** The counter's label names, in the order `increment` takes their values. */
  readonly labelNames: readonly [Name] | readonly [Name, Name];
}

/** For counters with one or two labels whose values come from closed sets (each label set is kept). */
export class PendingCounts<Name extends string> {
  /** first label value -> second label value ('' with one label) -> its count. */
  private readonly slots = new Map<string, Map<string, Slot>>();
  private readonly all: Slot[] = [];

  private readonly labelNames: readonly [Name] | readonly [Name, Name];

  constructor({ labelNames }: PendingCountsOptions<Name>) {
    this.labelNames = labelNames;
  }

  /** One more for these label values, in the order of `labelNames`. */
  increment(first: string, second = ''): void {
    let bySecond = this.slots.get(first);
    if (bySecond === undefined) this.slots.set(first, (bySecond = new Map()));
    let slot = bySecond.get(second);
    if (slot === undefined) {
      const [a, b] = this.labelNames;
      slot = { labels: b === undefined ? { [a]: first } : { [a]: first, [b]: second }, count: 0 };
      bySecond.set(second, slot);
      this.all.push(slot);
    }
    slot.count++;
  }

  /** Adds what was counted since the last flush; call it from the counter's `collect`. */
  flushInto(counter: client.Counter<Name>): void {
    for (const slot of this.all) {
      if (slot.count === 0) continue;
      counter.inc(slot.labels as client.LabelValues<Name>, slot.count);
      slot.count = 0;
    }
  }
}
