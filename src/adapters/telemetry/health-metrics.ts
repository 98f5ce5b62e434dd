// The instance's health as the readiness check sees it: ready for traffic, serving without a component,
// and each store's last check (with how long it has failed, for the state-based alert rules).
import client from 'prom-client';
import { StateDuration } from './state-duration.js';

export type StoreName = 'postgres' | 'redis';
/** What an instance that is still ready can be serving without (ace_degraded's `component`). */
export type DegradedComponent = 'postgres' | 'redis';

export interface HealthMetricsOptions {
  registry: client.Registry;
  /** Told each store check's result as it is recorded (Redis' also decides whether its cache layer counts as bypassed). */
  onStoreUp?: (store: StoreName, up: boolean) => void;
}

export class HealthMetrics {
  private readonly ready: client.Gauge;
  private readonly degraded: client.Gauge<'component'>;
  private readonly storeUp: client.Gauge<'store'>;
  private readonly storeUnavailable: StateDuration<'store'>;
  private readonly onStoreUp: (store: StoreName, up: boolean) => void;

  constructor(options: HealthMetricsOptions) {
    const registers = [options.registry];
    this.onStoreUp = options.onStoreUp ?? (() => undefined);
    this.storeUp = new client.Gauge({
      name: 'ace_store_up',
      help: '1 when the store answered its last check, else 0.',
      labelNames: ['store'],
      registers,
      aggregator: 'min', // down in any process counts as down
    });
    this.ready = new client.Gauge({ name: 'ace_ready', help: '1 when the instance is ready for traffic.', registers, aggregator: 'min' });
    this.degraded = new client.Gauge({
      name: 'ace_degraded',
      help: '1 while the instance is ready but serves without this component (postgres: no writable primary, tokens come from the caches and the audit spool; redis: configured but not answering, limits are per process).',
      labelNames: ['component'],
      registers,
      aggregator: 'max', // degraded in any process counts
    });
    for (const component of ['postgres', 'redis'] satisfies DegradedComponent[]) this.degraded.set({ component }, 0);
    // The state the state-based alert rules watch, as how long it has lasted (state-duration.ts).
    this.storeUnavailable = new StateDuration({
      name: 'ace_store_unavailable_seconds',
      help: 'How long the store has failed its checks (ace_store_up 0), in seconds; 0 while it answers.',
      labelNames: ['store'],
      registers,
    });
  }

  setStoreUp(store: StoreName, up: boolean): void {
    this.storeUp.set({ store }, up ? 1 : 0);
    this.storeUnavailable.set(!up, { store });
    this.onStoreUp(store, up);
  }

  setReady(ready: boolean): void {
    this.ready.set(ready ? 1 : 0);
  }

  setDegraded(component: DegradedComponent, degraded: boolean): void {
    this.degraded.set({ component }, degraded ? 1 : 0);
  }
}
