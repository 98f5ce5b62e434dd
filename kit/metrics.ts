// Reading the service's /metrics (Prometheus text format) in the tests and the bench.

/** Values of every sample of `name` whose labels include `labels`. */
export function metricSamples(text: string, name: string, labels: Record<string, string> = {}): number[] {
  const out: number[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const match = /^([^{\s]+)(?:\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) out.push(Number(match[3]));
  }
  return out;
}

/** Sum of every sample of `name` whose labels include `labels`; 0 when there is none. */
export function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  return metricSamples(text, name, labels).reduce((sum, value) => sum + value, 0);
}
