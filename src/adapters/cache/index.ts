// The cache adapter's public face: the Redis client type the rate limiters share.
export type { RedisClient } from './redis.js';
