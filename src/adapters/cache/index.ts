// The cache adapter's public face: the Redis client type the rate limiters share, and the cache's series.
export type { RedisClient } from './redis.js';
export { CacheMetrics, type CacheMetricsOptions, type CacheName, type RedisOperation } from './cache-metrics.js';
