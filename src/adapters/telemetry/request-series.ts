// The per-request HTTP series (ace_http_requests_total, ace_http_request_duration_seconds), recorded with
// plain arithmetic. prom-client's labelled inc/observe validate and hash the label object on every call,
// even through a bound child: about 3 µs a request on the 2-core machines (perf, under a JWKS flood), paid
// by every request. Here each series is found through three small maps (route, method, status) and the
// request adds to numbers; prom-client still owns the registry, the text and JSON formats and the cluster
// aggregation, through its custom-metric interface (an object with name, help, type, aggregator, get()).
import type client from 'prom-client';

interface Series {
  labels: { route: string; method: string; status: string };
  count: number;
  sum: number;
  /** Observations per bucket (not cumulative), by the index of the first bound >= the value. */
  buckets: Float64Array;
}

interface MetricValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

export interface RequestSeriesOptions {
  /** The registry both series are declared in (through prom-client's custom-metric interface). */
  registry: client.Registry;
  counterName: string;
  counterHelp: string;
  histogramName: string;
  histogramHelp: string;
  /** Upper bounds of the histogram's buckets, ascending (+Inf is implied). */
  buckets: readonly number[];
}

export class RequestSeries {
  private readonly byRoute = new Map<string, Map<string, Map<number, Series>>>();
  private readonly bounds: Float64Array;

  constructor(private readonly options: RequestSeriesOptions) {
    this.bounds = Float64Array.from(options.buckets);
    const register = (metric: { name: string; help: string; type: string; aggregator: string; get(): Promise<unknown>; reset(): void }) =>
      options.registry.registerMetric(metric as unknown as client.Metric);
    register({
      name: options.counterName,
      help: options.counterHelp,
      type: 'counter',
      aggregator: 'sum',
      get: async () => this.snapshot(options.counterName, options.counterHelp, 'counter', (s) => [{ labels: { ...s.labels }, value: s.count }]),
      reset: () => this.byRoute.clear(),
    });
    register({
      name: options.histogramName,
      help: options.histogramHelp,
      type: 'histogram',
      aggregator: 'sum',
      get: async () => this.snapshot(options.histogramName, options.histogramHelp, 'histogram', (s) => this.histogramValues(s)),
      reset: () => this.byRoute.clear(),
    });
  }

  /** One answered request. `route`, `method` and `status` come from closed sets (server.ts). */
  record(route: string, method: string, status: number, seconds: number): void {
    let byMethod = this.byRoute.get(route);
    if (byMethod === undefined) this.byRoute.set(route, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (byStatus === undefined) byMethod.set(method, (byStatus = new Map()));
    let series = byStatus.get(status);
    if (series === undefined) {
      series = { labels: { route, method, status: String(status) }, count: 0, sum: 0, buckets: new Float64Array(this.bounds.length) };
      byStatus.set(status, series);
    }
    series.count++;
    series.sum += seconds;
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && seconds > bounds[i]) i++;
    if (i < bounds.length) series.buckets[i]++;
  }

  private histogramValues(series: Series): MetricValue[] {
    const name = this.options.histogramName;
    const values: MetricValue[] = [];
    let cumulative = 0;
    for (let i = 0; i < this.bounds.length; i++) {
      cumulative += series.buckets[i];
      values.push({ labels: { le: this.bounds[i], ...series.labels }, value: cumulative, metricName: `${name}_bucket` });
    }
    values.push(
      { labels: { le: '+Inf', ...series.labels }, value: series.count, metricName: `${name}_bucket` },
      { labels: { ...series.labels }, value: series.sum, metricName: `${name}_sum` },
      { labels: { ...series.labels }, value: series.count, metricName: `${name}_count` },
    );
    return values;
  }

  private snapshot(name: string, help: string, type: string, valuesOf: (series: Series) => MetricValue[]) {
    const values: MetricValue[] = [];
    for (const byMethod of this.byRoute.values()) for (const byStatus of byMethod.values()) for (const series of byStatus.values()) values.push(...valuesOf(series));
    return { name, help, type, values, aggregator: 'sum' };
  }
}
