// Redis connections with fail-fast settings: when Redis is away, commands fail at once (no offline
// queue) so callers fall back to Postgres or the in-process limiter instead of waiting.
import { Redis } from 'ioredis';

export function connectRedis(url: string, commandTimeoutMs: number, onHealth?: (up: boolean) => void): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: commandTimeoutMs,
    connectTimeout: Math.max(1000, commandTimeoutMs),
    // Reconnect forever, backing off to 1 s: the service recovers by itself when Redis returns.
    retryStrategy: (times) => Math.min(50 * times, 1000),
    lazyConnect: false,
    // Commands issued in the same tick (many concurrent requests) share one write and one read.
    enableAutoPipelining: true,
  });
  redis.on('ready', () => onHealth?.(true));
  redis.on('close', () => onHealth?.(false));
  // Errors surface through failed commands; an 'error' listener keeps ioredis from logging or throwing.
  redis.on('error', () => {});
  return redis;
}
