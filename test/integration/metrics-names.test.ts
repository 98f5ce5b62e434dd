// /metrics as Prometheus' own linter (`promtool check metrics`) reads it: counters end in _total,
// nothing else does, and _sum/_count/_bucket belong to histograms and summaries only. prom-client's
// default gauges nodejs_active_{handles,requests,resources}_total broke the second rule; the service
// drops them (sum() of the per-type gauges gives the same numbers). promtool itself runs when on PATH.
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type ServiceHandle } from '../support/service.js';
import { seriesDifferences } from '../support/metrics-series.js';
import { missingOutsideCi } from '../support/tools.js';

/** promtool's naming rules (prometheus/client_golang testutil/promlint) that a registry can break. */
function nameProblems(exposition: string): string[] {
  const problems: string[] = [];
  for (const m of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m as unknown as [string, string, string];
    if (type === 'counter' && !name.endsWith('_total')) problems.push(`${name}: counter without _total`);
    if (type !== 'counter' && name.endsWith('_total')) problems.push(`${name}: ${type} ending in _total`);
    if (!['histogram', 'summary'].includes(type) && /_(sum|count|bucket)$/.test(name)) problems.push(`${name}: ${type} with a histogram suffix`);
    if (/[A-Z]/.test(name)) problems.push(`${name}: not snake_case`);
  }
  return problems;
}

const promtool = spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;

describe('/metrics names', () => {
  let service: ServiceHandle;
  let exposition: string;
  beforeAll(async () => {
    service = await startService({ mode: 'real' });
    // One request first, so the per-route series exist too.
    await fetch(`${service.publicUrl}/.well-known/jwks.json`);
    exposition = await (await fetch(`${service.adminUrl}/metrics`)).text();
  });
  afterAll(async () => {
    await service?.dispose();
  });

  it('follow promtool naming rules (no gauge ends in _total, every counter does)', () => {
    expect(exposition).toContain('# TYPE ace_http_requests_total counter');
    expect(exposition).toContain('# TYPE nodejs_active_handles gauge');
    expect(nameProblems(exposition)).toEqual([]);
  });

  it('are the series the service has always exported (test/fixtures/metrics-series.json)', () => {
    expect(seriesDifferences(exposition)).toEqual([]);
  });

  it('the rules catch what promtool flags in prom-client defaults', () => {
    expect(nameProblems('# TYPE nodejs_active_handles_total gauge\n# TYPE x_requests counter\n# TYPE y_count gauge\n')).toHaveLength(3);
  });

  it.skipIf(missingOutsideCi(!promtool, 'promtool (apt-get install -y prometheus), in CI a failure'))('pass `promtool check metrics`', () => {
    const run = spawnSync('promtool', ['check', 'metrics'], { input: exposition, encoding: 'utf8' });
    expect(`${run.stdout}${run.stderr}`).toBe('');
    expect(run.status).toBe(0);
  });
});
