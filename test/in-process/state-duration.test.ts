// StateDuration: at each scrape the gauge holds how long the state has lasted (0 while it does not hold);
// a state reported again keeps its first start, per label set, and an ended state starts over.
import { describe, expect, it } from 'vitest';
import client from 'prom-client';
import { StateDuration } from '../../src/adapters/telemetry/state-duration.js';

async function scrape(registry: client.Registry): Promise<Record<string, number>> {
  const [metric] = await registry.getMetricsAsJSON();
  return Object.fromEntries((metric?.values ?? []).map((v) => [JSON.stringify(v.labels), v.value]));
}

describe('StateDuration', () => {
  it('counts from the first report of the state, keeps counting while it is reported again, and reads 0 once it ends', async () => {
    const registry = new client.Registry();
    let now = 5_000;
    const state = new StateDuration({ name: 'x_seconds', help: 'x', labelNames: ['store'], registers: [registry], now: () => now });
    state.set(false, { store: 'redis' });
    expect(await scrape(registry)).toEqual({ '{"store":"redis"}': 0 });
    state.set(true, { store: 'redis' });
    now += 20_000;
    state.set(true, { store: 'redis' });
    state.set(true, { store: 'postgres' });
    now += 10_500;
    expect(await scrape(registry)).toEqual({ '{"store":"redis"}': 30, '{"store":"postgres"}': 10 });
    state.set(false, { store: 'redis' });
    expect(await scrape(registry)).toEqual({ '{"store":"redis"}': 0, '{"store":"postgres"}': 10 });
    state.set(true, { store: 'redis' });
    now += 2_000;
    expect((await scrape(registry))['{"store":"redis"}']).toBe(2);
  });

  it('exports no labelled series before its first report (a store that is not configured has none)', async () => {
    const registry = new client.Registry();
    new StateDuration({ name: 'x_seconds', help: 'x', labelNames: ['store'], registers: [registry] });
    expect(await registry.metrics()).not.toMatch(/^x_seconds/m);
  });
});
