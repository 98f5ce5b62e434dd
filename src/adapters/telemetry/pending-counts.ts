// Increments of a labelled counter kept as plain numbers and added to the counter when it is scraped (its
// collect hook). prom-client validates and hashes the label object on every inc, even through a bound child;
// for counters bumped on every request that is a measurable share of a request (request-series.ts).
import type client from 'prom-client';

export interface Slot {
  count: number;
}

export class PendingCounts<Labels extends Record<string, string>> {
  private readonly slots: { labels: Labels; slot: Slot }[] = [];

  /** A slot for one label set (make it once, keep it): the hot path does `slot.count++`. */
  slot(labels: Labels): Slot {
    const slot = { count: 0 };
    this.slots.push({ labels, slot });
    return slot;
  }

  /** Adds what was counted since the last flush; call it from the counter's `collect`. */
  flushInto(counter: client.Counter<Extract<keyof Labels, string>>): void {
    for (const { labels, slot } of this.slots) {
      if (slot.count === 0) continue;
      counter.inc(labels as client.LabelValues<Extract<keyof Labels, string>>, slot.count);
      slot.count = 0;
    }
  }
}
