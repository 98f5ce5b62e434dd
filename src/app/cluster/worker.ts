// Cluster mode, an HTTP process's side: /metrics answers with the cluster-wide sum, which the primary
// collects from every process over IPC (see primary.ts).
import type client from 'prom-client';
import { COLLECT_TIMEOUT_MS, LOCAL_METRICS_REQUEST, LOCAL_METRICS_RESPONSE, METRICS_REQUEST, METRICS_RESPONSE, type Message } from './messages.js';

/** In a worker: serve /metrics with the cluster-wide sum, asked of the primary over IPC. */
export function clusterMetricsText(registry: client.Registry): () => Promise<{ contentType: string; body: string }> {
  let nextId = 0;
  const waiting = new Map<number, (reply: { body?: string; contentType?: string; error?: string }) => void>();
  process.on('message', (message: Message & { body?: string; contentType?: string }) => {
    if (message?.type === LOCAL_METRICS_REQUEST) {
      registry.getMetricsAsJSON().then((metrics) => process.send!({ type: LOCAL_METRICS_RESPONSE, id: message.id, metrics }));
    } else if (message?.type === METRICS_RESPONSE && message.id !== undefined) {
      waiting.get(message.id)?.(message);
      waiting.delete(message.id);
    }
  });
  return () =>
    new Promise((resolve, reject) => {
      const id = ++nextId;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error('cluster metrics timed out'));
      }, COLLECT_TIMEOUT_MS + 3000);
      waiting.set(id, (reply) => {
        clearTimeout(timer);
        if (reply.error || reply.body === undefined) reject(new Error(reply.error ?? 'no metrics'));
        else resolve({ contentType: reply.contentType ?? registry.contentType, body: reply.body });
      });
      process.send!({ type: METRICS_REQUEST, id });
    });
}
