// Unauthenticated abuse of the metrics: HTTP lets a client send any method token, of any
// length. Each invented method used to become a label value of ace_http_*: 1,000 methods of 3,000
// characters made /metrics tens of MB and the process hundreds of MiB larger, never freed. Every label
// the service exports comes from a closed set, so the same requests leave both where they were.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type ServiceHandle } from '../support/service.js';
import { httpRequest, rawExchange, rssMiB } from '../support/faults.js';
import { metricSum } from '../../kit/metrics.js';

const metricsText = async (service: ServiceHandle) => (await fetch(`${service.adminUrl}/metrics`)).text();

/** `count` requests with invented methods of `length` characters, `parallel` connections at a time. */
async function inventedMethods(port: number, count: number, length: number, parallel = 25, path = '/api/v1/auth/token'): Promise<number[]> {
  const statuses: number[] = [];
  for (let sent = 0; sent < count; sent += parallel) {
    const batch = Array.from({ length: Math.min(parallel, count - sent) }, (_, i) => {
      const n = sent + i;
      // Distinct methods, letters only (a valid HTTP token), `length` characters each.
      const method = (n.toString(26).replace(/[0-9]/g, (d) => String.fromCharCode(103 + Number(d))).toUpperCase() + 'X'.repeat(length)).slice(0, length);
      return rawExchange(port, httpRequest(method, path, { 'Content-Type': 'application/json' }, '{}'), { timeoutMs: 5000 });
    });
    for (const result of await Promise.all(batch)) statuses.push(result.responses[0]?.status ?? 0);
  }
  return statuses;
}

describe('invented HTTP methods', () => {
  let service: ServiceHandle;
  let port: number;

  beforeAll(async () => {
    service = await startService({ mode: 'real' });
    port = Number(new URL(service.publicUrl).port);
  });

  afterAll(async () => {
    await service?.dispose();
  });

  it('1,000 requests with invented 3,000-character methods leave /metrics and RSS within 10 %', async () => {
    // Warm up first (the same kinds of request), so that what is measured is what more of them cost.
    await inventedMethods(port, 100, 3000);
    await inventedMethods(port, 100, 3000, 25, '/no/such/path');
    const before = await metricsText(service);
    const rssBefore = rssMiB(service.process.pid!);

    const statuses = [...(await inventedMethods(port, 500, 3000)), ...(await inventedMethods(port, 500, 3000, 25, '/no/such/path'))];
    // Each was answered (405 on a known path, 404 elsewhere), not dropped.
    expect(statuses.filter((s) => s === 405).length).toBe(500);
    expect(statuses.filter((s) => s === 404).length).toBe(500);

    const after = await metricsText(service);
    const rssAfter = rssMiB(service.process.pid!);
    expect(after.length / before.length).toBeLessThan(1.1);
    expect(rssAfter / rssBefore, `RSS ${rssBefore.toFixed(1)} -> ${rssAfter.toFixed(1)} MiB`).toBeLessThan(1.1);
    // Still counted, under the closed label value.
    const counted = (text: string, route: string) => metricSum(text, 'ace_http_requests_total', { route, method: 'other' });
    expect(counted(after, 'token') - counted(before, 'token')).toBe(500);
    expect(counted(after, 'unmatched') - counted(before, 'unmatched')).toBe(500);
  });

  it('exports no label value outside the closed sets, whatever the requests were', async () => {
    await inventedMethods(port, 50, 20, 25, '/admin/v1/agents');
    await rawExchange(port, httpRequest('get', '/.well-known/jwks.json'));
    const text = await metricsText(service);
    const allowed: Record<string, RegExp> = {
      method: /^(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS|other)$/,
      route: /^[a-z_]+$/,
      status: /^[1-5]\d\d$/,
      outcome: /^[a-z_]+$/,
    };
    for (const line of text.split('\n')) {
      if (!line.startsWith('ace_')) continue;
      for (const [, name, value] of line.matchAll(/(\w+)="([^"]*)"/g)) {
        expect(value.length, line.slice(0, 200)).toBeLessThanOrEqual(40);
        if (allowed[name]) expect(value, line.slice(0, 200)).toMatch(allowed[name]);
      }
    }
    // A lower-case known method is that method.
    expect(metricSum(text, 'ace_http_requests_total', { route: 'jwks', method: 'GET' })).toBeGreaterThan(0);
  });
});
