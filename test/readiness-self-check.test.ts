// The service evaluates its own readiness on a timer (issue #25): ace_ready and ace_store_up follow a
// Postgres outage while nobody requests /readyz, so Prometheus sees the outage from /metrics alone.
// The shared Postgres is never touched: a TCP proxy in this process stands between (refuse = down).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, startService, type ServiceHandle, type TestDatabase } from './support/service.js';
import { TcpProxy } from './support/faults.js';
import { metricSum } from '../kit/metrics.js';
import { waitFor } from '../kit/wait.js';

describe('readiness without probe traffic', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let service: ServiceHandle;

  beforeAll(async () => {
    database = await createDatabase();
    proxy = new TcpProxy(5432);
    const url = new URL(database.url);
    url.port = String(await proxy.listen());
    // startService waits for one /readyz 200; after that this file never asks /readyz again.
    service = await startService({ mode: 'real', database: { ...database, url: url.toString() }, env: { STORE_TIMEOUT_MS: '1000' } });
  });

  afterAll(async () => {
    await service?.dispose();
    await proxy?.close();
    await database?.drop();
  });

  const gauges = async () => {
    const text = await (await fetch(`${service.adminUrl}/metrics`)).text();
    return { ready: metricSum(text, 'ace_ready'), postgres: metricSum(text, 'ace_store_up', { store: 'postgres' }), readyzCalls: readyzCount(text) };
  };
  /** Requests the service counted on /readyz, whatever their status. */
  const readyzCount = (text: string) =>
    [...text.matchAll(/^ace_http_requests_total\{route="readyz",[^}]*\} (\S+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);

  it('ace_ready and ace_store_up{store="postgres"} go to 0 during a Postgres outage and back to 1 after it, with no /readyz request', async () => {
    const before = await gauges();
    expect(before.ready).toBe(1);
    expect(before.postgres).toBe(1);

    proxy.refuse();
    await waitFor('ace_ready 0 and ace_store_up{store="postgres"} 0', async () => {
      const now = await gauges();
      return now.ready === 0 && now.postgres === 0;
    });

    proxy.forward();
    await waitFor('ace_ready 1 and ace_store_up{store="postgres"} 1', async () => {
      const now = await gauges();
      return now.ready === 1 && now.postgres === 1;
    });

    // Nobody asked /readyz in between: the gauges moved on the service's own timer.
    expect((await gauges()).readyzCalls).toBe(before.readyzCalls);
  });
});
