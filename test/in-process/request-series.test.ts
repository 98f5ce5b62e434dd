// RequestSeries keeps the per-request HTTP series with plain arithmetic and hands prom-client finished values
// when scraped: the text, the JSON and the cluster aggregate must be exactly what prom-client's own Counter and
// Histogram give for the same observations.
import { describe, expect, it } from 'vitest';
import client from 'prom-client';
import { RequestSeries } from '../../src/adapters/telemetry/request-series.js';
import { PendingCounts } from '../../src/adapters/telemetry/pending-counts.js';

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56];
const NAMES = {
  counterName: 'ace_http_requests_total',
  counterHelp: 'HTTP requests answered, by route pattern, method and status.',
  histogramName: 'ace_http_request_duration_seconds',
  histogramHelp: 'Time from request to the last byte of the answer.',
};

/** The same observations through prom-client's own metrics. */
function reference(observations: [string, string, number, number][]) {
  const registry = new client.Registry();
  const counter = new client.Counter({ name: NAMES.counterName, help: NAMES.counterHelp, labelNames: ['route', 'method', 'status'], registers: [registry] });
  const histogram = new client.Histogram({ name: NAMES.histogramName, help: NAMES.histogramHelp, labelNames: ['route', 'method', 'status'], buckets: BUCKETS, registers: [registry] });
  for (const [route, method, status, seconds] of observations) {
    const labels = { route, method, status: String(status) };
    counter.inc(labels);
    histogram.observe(labels, seconds);
  }
  return registry;
}

function ours(observations: [string, string, number, number][]) {
  const registry = new client.Registry();
  const series = new RequestSeries({ registry, ...NAMES, buckets: BUCKETS });
  for (const [route, method, status, seconds] of observations) series.record(route, method, status, seconds);
  return registry;
}

// Values on bucket bounds, between them, beyond the last, and zero: the "le" edges are where a slip shows.
const OBSERVATIONS: [string, string, number, number][] = [
  ['token', 'POST', 200, 0.0004],
  ['token', 'POST', 200, 0.001],
  ['token', 'POST', 200, 0.0011],
  ['token', 'POST', 401, 0.02],
  ['token', 'POST', 200, 3.5],
  ['jwks', 'GET', 200, 0],
  ['jwks', 'HEAD', 200, 2.56],
  ['unmatched', 'other', 404, 0.33],
  ['jwks', 'GET', 304, 0.005],
];

describe('RequestSeries', () => {
  it('renders the same Prometheus text as prom-client\'s Counter and Histogram', async () => {
    // prom-client lists series in first-seen order; so does RequestSeries per route and method, so compare sorted lines.
    const lines = async (registry: client.Registry) => (await registry.metrics()).split('\n').sort();
    expect(await lines(ours(OBSERVATIONS))).toEqual(await lines(reference(OBSERVATIONS)));
  });

  it('gives the same JSON, and the same cluster aggregate of two processes', async () => {
    const half = OBSERVATIONS.slice(0, 4);
    const rest = OBSERVATIONS.slice(4);
    const normalise = (json: client.MetricObjectWithValues<client.MetricValue<string>>[]) =>
      json.map((m) => ({ ...m, values: m.values.map(({ labels, value, metricName }: any) => ({ labels, value, metricName })).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))) }));
    const oursJson = [await ours(half).getMetricsAsJSON(), await ours(rest).getMetricsAsJSON()];
    const refJson = [await reference(half).getMetricsAsJSON(), await reference(rest).getMetricsAsJSON()];
    expect(normalise(oursJson[0] as any)).toEqual(normalise(refJson[0] as any));
    const aggregated = async (parts: unknown[]) => (await client.AggregatorRegistry.aggregate(parts as any).metrics()).split('\n').sort();
    expect(await aggregated(oursJson)).toEqual(await aggregated(refJson));
  });

  it('counts every request once and resets with the registry', async () => {
    const registry = ours(OBSERVATIONS);
    expect(await registry.metrics()).toContain('ace_http_requests_total{route="token",method="POST",status="200"} 4');
    registry.resetMetrics();
    expect(await registry.metrics()).not.toContain('route="token"');
  });
});

describe('PendingCounts', () => {
  it('adds what was counted since the last scrape, once, through the counter\'s collect hook', async () => {
    const registry = new client.Registry();
    const counts = new PendingCounts({ labelNames: ['outcome'] });
    const counter: client.Counter<'outcome'> = new client.Counter({ name: 't_total', help: 't', labelNames: ['outcome'], registers: [registry], collect: () => counts.flushInto(counter) });
    for (let i = 0; i < 3; i++) counts.increment('issued');
    counts.increment('refused');
    expect(await registry.metrics()).toContain('t_total{outcome="issued"} 3');
    // A second scrape with nothing new adds nothing; new counts add to the total.
    expect(await registry.metrics()).toContain('t_total{outcome="issued"} 3');
    counts.increment('issued');
    counts.increment('issued');
    const text = await registry.metrics();
    expect(text).toContain('t_total{outcome="issued"} 5');
    expect(text).toContain('t_total{outcome="refused"} 1');
  });
});
