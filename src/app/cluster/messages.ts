// The IPC messages between the cluster primary (primary.ts) and its HTTP processes (worker.ts).
/** worker → primary: this process started and serves. */
export const READY_MESSAGE = 'ace:ready';
/** worker → primary: "answer this scrape with the cluster-wide metrics". */
export const METRICS_REQUEST = 'ace:metrics-request';
/** primary → worker: the aggregated text for a METRICS_REQUEST. */
export const METRICS_RESPONSE = 'ace:metrics-response';
/** primary → worker: "send me your own metrics"; worker → primary: LOCAL_METRICS_RESPONSE. */
export const LOCAL_METRICS_REQUEST = 'ace:local-metrics-request';
export const LOCAL_METRICS_RESPONSE = 'ace:local-metrics-response';
/** A worker that does not answer a collection within this is left out of that scrape. */
export const COLLECT_TIMEOUT_MS = 2000;

export type Message = { type?: string; id?: number; metrics?: unknown; error?: string };
