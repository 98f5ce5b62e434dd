// The process's own series: prom-client's defaults (CPU, memory, event loop, GC) and the start time.
import client from 'prom-client';

export function declareProcessMetrics(registry: client.Registry): void {
  client.collectDefaultMetrics({ register: registry });
  // promtool check metrics: a gauge must not end in _total. prom-client's defaults export the totals
  // of active handles/requests/resources under such names; each is sum() of the per-type gauge
  // without the suffix (nodejs_active_handles{type}), so drop them.
  for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
    registry.removeSingleMetric(name);
  }
  // prom-client's process_start_time_seconds is left out of the cluster aggregate; this one reports the
  // newest process, so the restart of any process of the pod changes it.
  new client.Gauge({ name: 'ace_process_start_time_seconds', help: 'Start time of the (newest) service process, Unix seconds.', registers: [registry], aggregator: 'max' }).set(
    Math.floor((Date.now() - process.uptime() * 1000) / 1000),
  );
}
