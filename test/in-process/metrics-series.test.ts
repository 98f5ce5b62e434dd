// /metrics of the service in process lists the same series as the service did before their declarations
// moved to the adapters that own them (test/fixtures/metrics-series.json, taken from a running service):
// same names, types, help texts and label names. The process-level twin is test/integration/metrics-names.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inProcessApp, type InProcessApp } from '../support/in-process.js';
import { EXPECTED_SERIES, seriesDifferences } from '../support/metrics-series.js';

/** Declared by adapters the in-process app replaces with memory ports (Postgres, the crypto pools). */
const NOT_IN_PROCESS = ['ace_argon2_warming_up', 'ace_clock_skew_seconds', 'ace_postgres_primary_info', 'ace_worker_queue_depth'];

describe('/metrics series in process', () => {
  let app: InProcessApp;
  let exposition: string;
  beforeAll(async () => {
    app = await inProcessApp();
    // A request first, so the per-route HTTP series have samples (and label names to compare).
    await app.inject({ method: 'GET', url: '/.well-known/jwks.json' });
    const answer = await app.injectAdmin({ method: 'GET', url: '/metrics', headers: [['authorization', `Bearer ${app.adminToken}`]] });
    expect(answer.status).toBe(200);
    exposition = answer.body.toString();
  });
  afterAll(async () => {
    await app?.close();
  });

  it('are the expected names, types, help texts and labels', () => {
    expect(seriesDifferences(exposition, EXPECTED_SERIES.filter((s) => !NOT_IN_PROCESS.includes(s.name)))).toEqual([]);
  });

  it('the comparison notices a renamed series, a changed help text and a changed label', () => {
    const renamed = exposition.replaceAll('ace_tokens_issued_total', 'ace_tokens_total');
    expect(seriesDifferences(renamed)).toEqual(expect.arrayContaining(['ace_tokens_issued_total: missing', 'ace_tokens_total: not expected']));
    const helped = exposition.replace('# HELP ace_ready 1 when', '# HELP ace_ready One when');
    expect(seriesDifferences(helped).some((p) => p.startsWith('ace_ready: help'))).toBe(true);
    const relabelled = exposition.replaceAll('ace_rate_limit_refusals_total{limiter=', 'ace_rate_limit_refusals_total{kind=');
    expect(seriesDifferences(relabelled)).toContain('ace_rate_limit_refusals_total: labels kind, expected limiter');
  });
});
