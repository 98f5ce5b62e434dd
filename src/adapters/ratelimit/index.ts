// The rate-limit adapter's public face.
export { Limiters, makeLimiter, rateLimitedError, type LimiterName, type LimitersOptions } from './limiters.js';
export { AdminAuthLimiter, type AdminAuthLimiterOptions } from './admin-auth-limiter.js';
export { RateLimitMetrics, type RateLimitMetricsOptions, type RefusingLimiter } from './rate-limit-metrics.js';
