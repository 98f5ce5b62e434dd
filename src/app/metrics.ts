// The process's metrics: one prom-client registry, and on it the series each adapter declares in its own
// module, handed to the adapter at construction. Series that read an object (the pools' queue depth, the
// keys, the primary, the clock skew, the poll budgets) are declared with that object where it is made.
import client from 'prom-client';
import { CacheMetrics } from '../adapters/cache/index.js';
import { PoolMetrics } from '../adapters/crypto/pool-metrics.js';
import { AuditMetrics } from '../adapters/audit-trail/audit-metrics.js';
import { HttpMetrics } from '../adapters/http/http-metrics.js';
import { RateLimitMetrics } from '../adapters/ratelimit/index.js';
import { RevocationMetrics } from '../adapters/http/routes/revocation-metrics.js';
import { CoreTelemetry, declareProcessMetrics, HealthMetrics, type Logger } from '../adapters/telemetry/index.js';

export interface AppMetrics {
  registry: client.Registry;
  http: HttpMetrics;
  cache: CacheMetrics;
  rateLimits: RateLimitMetrics;
  pools: PoolMetrics;
  audit: AuditMetrics;
  revocation: RevocationMetrics;
  health: HealthMetrics;
  /** The core's events as metrics and logs. */
  telemetry: CoreTelemetry;
}

export function createMetrics({ logger }: { logger: Logger }): AppMetrics {
  const registry = new client.Registry();
  declareProcessMetrics(registry);
  const cache = new CacheMetrics({ registry });
  const rateLimits = new RateLimitMetrics({ registry });
  return {
    registry,
    http: new HttpMetrics({ registry }),
    cache,
    rateLimits,
    pools: new PoolMetrics({ registry }),
    audit: new AuditMetrics({ registry }),
    revocation: new RevocationMetrics({ registry }),
    // Redis failing its checks also bypasses its cache layer.
    health: new HealthMetrics({ registry, onStoreUp: (store, up) => {
      if (store === 'redis') cache.setRedisUp(up);
    } }),
    telemetry: new CoreTelemetry({ registry, logger, cache, rateLimits }),
  };
}

/** /metrics of this process alone. */
export function localMetricsText(registry: client.Registry): () => Promise<{ contentType: string; body: string }> {
  return async () => ({ contentType: registry.contentType, body: await registry.metrics() });
}
