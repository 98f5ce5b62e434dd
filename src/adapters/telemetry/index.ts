// The telemetry adapter's public face: what other adapters and the composition root use.
export { HealthMetrics, type HealthMetricsOptions, type StoreName, type DegradedComponent } from './health-metrics.js';
export { declareProcessMetrics } from './process-metrics.js';
export { CoreTelemetry, type CoreTelemetryOptions } from './core-telemetry.js';
export { PendingCounts } from './pending-counts.js';
export { RequestSeries, type RequestSeriesOptions } from './request-series.js';
export { StateDuration } from './state-duration.js';
export { ThrottledLog, type ThrottledLogOptions } from './throttled-log.js';
export { createLogger, loggerOptions, type Logger } from './logger.js';
export { isDroppedSocketError, tolerateDroppedStoreErrors } from './dropped-store-errors.js';
export { CENSOR, isSensitiveKey, redactDeep } from './redact.js';
