// The revocation feed's transmitter (stream, signing, poll answers, push) and its uWS transport.
export {
  RevocationTransmitter,
  DEFAULT_MAX_EVENTS,
  MAX_MAX_EVENTS,
  ANSWER_CACHE_BYTES,
  type FeedTransport,
  type RevocationMetricsSink,
  type RevocationTransmitterPorts,
} from './transmitter.js';
export { SocketTopics } from './socket-topics.js';
export { RevocationMetrics, type RevocationMetricsOptions } from './revocation-metrics.js';
