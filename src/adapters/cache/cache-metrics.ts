// The cache layer's and Redis' series: look-ups per cache, whether the Redis layer is read, the Redis
// topology in use and the Redis commands that failed. Label values come from closed sets.
import client from 'prom-client';
import { PendingCounts, StateDuration } from '../telemetry/index.js';
import type { BreakerConnection } from './redis-breaker.js';

/** What a failed Redis command was doing (ace_redis_failures_total's `operation`). */
export type RedisOperation =
  | 'cache_get'
  | 'cache_set'
  | 'cache_delete'
  | 'cache_sweep'
  | 'verified_get'
  | 'verified_set'
  | 'verified_delete'
  | 'publish'
  | 'bus_ping'
  | 'rate_limit_refund'
  | 'admin_limit_read'
  | 'reconnect';
export type CacheName = 'local' | 'redis' | 'verified' | 'verified_shared';

export interface CacheMetricsOptions {
  registry: client.Registry;
}

export class CacheMetrics {
  private readonly requests: client.Counter<'cache' | 'result'>;
  /** Counted on every token request: plain numbers, added to the counter when scraped (pending-counts.ts). */
  private readonly requestCounts = new PendingCounts({ labelNames: ['cache', 'result'] });
  private readonly topology: client.Gauge<'topology' | 'primary'>;
  private readonly trusted: client.Gauge;
  private readonly failures: client.Counter<'operation'>;
  private readonly breakerOpen: client.Gauge<'connection'>;
  private readonly bypassed: StateDuration;
  // The cache layer is bypassed while Redis fails its checks (every read would fail) as well as while
  // the layer is distrusted (cached-store.ts), which begins only at the next cache call or reconnect.
  private redisUp = true;
  private redisCacheIsTrusted = true;

  constructor({ registry }: CacheMetricsOptions) {
    const registers = [registry];
    this.requests = new client.Counter({
      name: 'ace_cache_requests_total',
      help: 'Cache look-ups by cache and result (hit ratio = hit / (hit + miss)).',
      labelNames: ['cache', 'result'],
      registers,
      collect: () => this.requestCounts.flushInto(this.requests),
    });
    this.topology = new client.Gauge({
      name: 'ace_redis_topology_info',
      help: 'The Redis topology in use (standalone, sentinel, cluster) and its master(s) host:port, 1 per master; absent without Redis.',
      labelNames: ['topology', 'primary'],
      registers,
      aggregator: 'max',
    });
    this.trusted = new client.Gauge({
      name: 'ace_redis_cache_trusted',
      help: '1 while the Redis cache layer is read; 0 while it is bypassed after a failed Redis write or a reconnect, until it has been swept.',
      registers,
      aggregator: 'min',
    });
    this.failures = new client.Counter({
      name: 'ace_redis_failures_total',
      help: 'Redis commands that failed, by operation (cache_get, cache_set, cache_delete, cache_sweep, verified_get, verified_set, verified_delete, publish, bus_ping, rate_limit_refund, admin_limit_read, reconnect); none is ignored.',
      labelNames: ['operation'],
      registers,
    });
    this.breakerOpen = new client.Gauge({
      name: 'ace_redis_breaker_open',
      help: '1 while a Redis connection (commands, subscriber) was dropped for staying silent past its deadline (half-open or hung) and no PING has answered since: Redis is gone around as when it is down; absent without Redis.',
      labelNames: ['connection'],
      registers,
      aggregator: 'max', // open in any process counts
    });
    // The state the state-based alert rules watch, as how long it has lasted (state-duration.ts).
    this.bypassed = new StateDuration({
      name: 'ace_redis_cache_bypassed_seconds',
      help: 'How long the Redis cache layer has been bypassed (Redis fails its checks, or ace_redis_cache_trusted 0), in seconds; 0 while it is read, and without Redis.',
      registers,
    });
    this.bypassed.set(false);
    // Pre-created so dashboards and ratios see zeros instead of gaps.
    for (const cache of ['local', 'redis', 'verified', 'verified_shared'] satisfies CacheName[]) for (const result of ['hit', 'miss']) this.requests.inc({ cache, result }, 0);
  }

  cache(cache: CacheName, hit: boolean): void {
    this.requestCounts.increment(cache, hit ? 'hit' : 'miss');
  }

  /** Redis answered its last check (or not): while it does not, the cache layer counts as bypassed. */
  setRedisUp(up: boolean): void {
    this.redisUp = up;
    this.bypassed.set(!this.redisUp || !this.redisCacheIsTrusted);
  }

  /** The Redis topology and its current master(s); replaces what was reported before. */
  setRedisTopology(topology: string, primaries: string[]): void {
    this.topology.reset();
    for (const primary of primaries.length > 0 ? primaries : ['unknown']) this.topology.set({ topology, primary }, 1);
  }

  /** No Redis configured: the cache layer is absent, not bypassed (nothing to alert on). */
  noRedisCache(): void {
    this.trusted.set(0);
  }

  setRedisCacheTrusted(trusted: boolean): void {
    this.trusted.set(trusted ? 1 : 0);
    this.redisCacheIsTrusted = trusted;
    this.bypassed.set(!this.redisUp || !this.redisCacheIsTrusted);
  }

  /** A connection's breaker (redis-breaker.ts) opened or closed; set to 0 for each connection at start. */
  setRedisBreakerOpen(connection: BreakerConnection, open: boolean): void {
    this.breakerOpen.set({ connection }, open ? 1 : 0);
  }

  redisFailed(operation: RedisOperation): void {
    this.failures.inc({ operation });
  }
}
