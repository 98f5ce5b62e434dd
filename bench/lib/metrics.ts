// Reads counters from the service's /metrics (cluster-wide sum in cluster mode) to check that a
// measurement did what it claims: warm token requests should run (almost) no argon2 verification, cold ones
// one each.
export async function argon2Tasks(adminUrl: string): Promise<number | null> {
  try {
    const response = await fetch(`${adminUrl}/metrics`);
    if (response.status !== 200) return null;
    return sumSeries(await response.text(), 'ace_worker_task_duration_seconds_count', 'pool="argon2"');
  } catch {
    return null;
  }
}

/** Sum of every sample of `name` whose labels contain `label`; null when there is none. */
export function sumSeries(text: string, name: string, label: string): number | null {
  let sum = 0;
  let found = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) || !line.includes(label)) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(value)) {
      sum += value;
      found = true;
    }
  }
  return found ? sum : null;
}
