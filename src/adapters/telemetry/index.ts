// The telemetry adapter's public face: what other adapters and the composition root use.
export { Metrics, type CacheName, type StoreName } from './metrics.js';
export { RevocationMetrics } from './revocation-metrics.js';
export { CoreTelemetry } from './core-telemetry.js';
export { createLogger, loggerOptions, type Logger } from './logger.js';
export { isDroppedSocketError, tolerateDroppedStoreErrors } from './dropped-store-errors.js';
export { CENSOR, isSensitiveKey, redactDeep } from './redact.js';
