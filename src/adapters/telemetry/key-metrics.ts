// The signing keys' series, declared with the source they read (the key manager's summary), once it exists.
import client from 'prom-client';

export interface KeyInfo {
  activeAgeSeconds: number;
  rotationIntervalSeconds: number;
  byState: Record<string, number>;
}

export function declareKeyMetrics(registry: client.Registry, keyInfo: () => KeyInfo): void {
  const registers = [registry];
  new client.Gauge({
    name: 'ace_signing_key_active_age_seconds',
    help: 'Age of the active signing key since it became active.',
    registers,
    aggregator: 'max', // every process sees the same keys: summing would multiply
    collect() {
      this.set(keyInfo().activeAgeSeconds);
    },
  });
  new client.Gauge({
    name: 'ace_signing_key_rotation_interval_seconds',
    help: 'Configured automatic rotation interval (0 when off).',
    registers,
    aggregator: 'max',
    collect() {
      this.set(keyInfo().rotationIntervalSeconds);
    },
  });
  new client.Gauge({
    name: 'ace_signing_keys',
    help: 'Signing keys per state.',
    labelNames: ['state'],
    registers,
    aggregator: 'max',
    collect() {
      const byState = keyInfo().byState;
      for (const state of ['next', 'active', 'retiring', 'retired']) this.set({ state }, byState[state] ?? 0);
    },
  });
}
