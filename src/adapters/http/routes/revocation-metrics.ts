// The revocation feed's series (no ids in labels): subscribers, live entries, publish-to-send latency,
// and the feed requests refused. The poll's budgets and answer cache are declared with their sources
// (revocation-poll.ts).
import client from 'prom-client';
import { PendingCounts } from '../../telemetry/index.js';

export interface RevocationMetricsOptions {
  registry: client.Registry;
}

/** Implements the transmitter's RevocationMetricsSink, and counts the feed's refusals. */
export class RevocationMetrics {
  private readonly subscribers: client.Gauge;
  private readonly entries: client.Gauge;
  private readonly latency: client.Histogram;
  private readonly refusals: client.Counter<'transport' | 'reason'>;
  /** A flood of refusals costs an increment each, added to the counter when scraped (pending-counts.ts). */
  private readonly refusalCounts = new PendingCounts({ labelNames: ['transport', 'reason'] });

  constructor({ registry }: RevocationMetricsOptions) {
    const registers = [registry];
    this.subscribers = new client.Gauge({
      name: 'ace_revocation_subscribers',
      help: 'WebSocket subscribers of revocation feeds connected to this process.',
      registers,
    });
    this.entries = new client.Gauge({
      name: 'ace_revocation_entries_live',
      help: 'Revocation entries not yet expired (one per affected platform), as last counted.',
      registers,
      // Every process counts the same table: the cluster-wide value is the maximum, not the sum.
      aggregator: 'max',
    });
    this.latency = new client.Histogram({
      name: 'ace_revocation_publish_to_send_seconds',
      help: 'Time from the admin change that appended a revocation entry to its push to this process\'s subscribers.',
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    this.refusals = new client.Counter({
      name: 'ace_revocation_feed_refused_total',
      help: 'Revocation feed requests refused before any work: unauthorized (feed token), budget (a credential past its poll budget), per_address or total (WebSocket caps).',
      labelNames: ['transport', 'reason'],
      registers,
      collect: () => this.refusalCounts.flushInto(this.refusals),
    });
  }

  /**
   * A feed request refused before any work: `unauthorized` (no, wrong, revoked or another platform's feed
   * token), `budget` (a credential polling faster than its budget), `per_address` / `total` (the WebSocket
   * caps, REVOCATION_WS_MAX_PER_ADDRESS / REVOCATION_WS_MAX).
   */
  refused(transport: 'poll' | 'websocket', reason: 'unauthorized' | 'budget' | 'per_address' | 'total'): void {
    this.refusalCounts.increment(transport, reason);
  }

  subscriberDelta(delta: number): void {
    this.subscribers.inc(delta);
  }

  published(seconds: number): void {
    this.latency.observe(seconds);
  }

  setEntriesLive(count: number): void {
    this.entries.set(count);
  }
}
