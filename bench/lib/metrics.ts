// Reads counters from the service's /metrics (cluster-wide sum in cluster mode) to check that a
// measurement did what it claims: warm token requests should run (almost) no argon2 verification, cold ones
// one each.
import { metricSamples } from '../../kit/metrics.js';

/** argon2 tasks the service has run so far; null when /metrics does not answer or has no such series. */
export async function argon2Tasks(adminUrl: string): Promise<number | null> {
  let text: string;
  try {
    const response = await fetch(`${adminUrl}/metrics`);
    text = await response.text();
    if (response.status !== 200) return null;
  } catch {
    return null; // a deployed service may not expose /metrics to the bench: the check is then skipped
  }
  const samples = metricSamples(text, 'ace_worker_task_duration_seconds_count', { pool: 'argon2' });
  return samples.length === 0 ? null : samples.reduce((sum, value) => sum + value, 0);
}
