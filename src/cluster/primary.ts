// Cluster mode (WORKERS > 1): the primary forks one HTTP process per worker (each with its own uWS
// listeners on the shared ports, via SO_REUSEPORT, and its own crypto pools), replaces a process that
// dies, answers /metrics requests with the sum over every process, and fans SIGTERM out for a
// graceful stop.
import cluster, { type Worker } from 'node:cluster';
import client from 'prom-client';
import type { Config } from '../config/config.js';
import type { Logger } from '../log/logger.js';

export const READY_MESSAGE = 'ace:ready';
export const METRICS_REQUEST = 'ace:metrics-request';
export const METRICS_RESPONSE = 'ace:metrics-response';

export function runPrimary(config: Config, logger: Logger): void {
  const aggregator = new client.AggregatorRegistry();
  let stopping = false;
  // Only a process that once started is replaced when it dies; one that fails at start-up (bad
  // settings, wrong KEY_ENCRYPTION_KEY) would fail again, so the whole service stops instead.
  const started = new Set<number>();

  const fork = (): Worker => {
    const worker = cluster.fork();
    worker.on('message', (message: { type?: string; id?: number }) => {
      if (message?.type === READY_MESSAGE) started.add(worker.id);
      if (message?.type !== METRICS_REQUEST) return;
      aggregator.clusterMetrics().then(
        (body) => worker.send({ type: METRICS_RESPONSE, id: message.id, body, contentType: aggregator.contentType }),
        (error: Error) => worker.send({ type: METRICS_RESPONSE, id: message.id, error: error.message }),
      );
    });
    return worker;
  };

  for (let i = 0; i < config.workers; i++) fork();
  logger.info({ workers: config.workers }, 'cluster primary started');

  cluster.on('exit', (worker, code, signal) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) {
        logger.info('all workers stopped');
        process.exit(process.exitCode ?? 0);
      }
      return;
    }
    if (!started.has(worker.id)) {
      logger.fatal({ worker_pid: worker.process.pid, code, signal }, 'worker failed to start; stopping the service');
      stop('SIGTERM');
      process.exitCode = 1;
      return;
    }
    started.delete(worker.id);
    logger.error({ worker_pid: worker.process.pid, code, signal }, 'worker died; starting a replacement');
    setTimeout(fork, 200);
  });

  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping workers');
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
    setTimeout(() => {
      logger.error('workers did not stop in time; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs + 4000).unref();
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(process.exitCode ?? 0);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

/** In a worker: serve /metrics with the cluster-wide sum, asked of the primary over IPC. */
export function clusterMetricsText(registry: client.Registry): () => Promise<{ contentType: string; body: string }> {
  // Constructing one installs prom-client's IPC listener that answers the primary's collection requests.
  new client.AggregatorRegistry();
  client.AggregatorRegistry.setRegistries([registry]);
  let nextId = 0;
  const waiting = new Map<number, (reply: { body?: string; contentType?: string; error?: string }) => void>();
  process.on('message', (message: { type?: string; id?: number; body?: string; contentType?: string; error?: string }) => {
    if (message?.type !== METRICS_RESPONSE || message.id === undefined) return;
    waiting.get(message.id)?.(message);
    waiting.delete(message.id);
  });
  return () =>
    new Promise((resolve, reject) => {
      const id = ++nextId;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error('cluster metrics timed out'));
      }, 5000);
      waiting.set(id, (reply) => {
        clearTimeout(timer);
        if (reply.error || reply.body === undefined) reject(new Error(reply.error ?? 'no metrics'));
        else resolve({ contentType: reply.contentType ?? registry.contentType, body: reply.body });
      });
      process.send!({ type: METRICS_REQUEST, id });
    });
}
