// Cluster mode (WORKERS > 1): the primary forks one HTTP process per worker (each with its own uWS
// listeners on the shared ports, via SO_REUSEPORT, and its own crypto pools), replaces a process that
// dies, answers /metrics requests with the sum over every process, and fans SIGTERM out for a
// graceful stop.
import cluster, { type Worker } from 'node:cluster';
import client from 'prom-client';
import type { Config } from '../config/config.js';
import type { Logger } from '../log/logger.js';

export const READY_MESSAGE = 'ace:ready';
/** worker → primary: "answer this scrape with the cluster-wide metrics". */
export const METRICS_REQUEST = 'ace:metrics-request';
/** primary → worker: the aggregated text for a METRICS_REQUEST. */
export const METRICS_RESPONSE = 'ace:metrics-response';
/** primary → worker: "send me your own metrics"; worker → primary: LOCAL_METRICS_RESPONSE. */
const LOCAL_METRICS_REQUEST = 'ace:local-metrics-request';
const LOCAL_METRICS_RESPONSE = 'ace:local-metrics-response';
/** A worker that does not answer a collection within this is left out of that scrape. */
const COLLECT_TIMEOUT_MS = 2000;

type Message = { type?: string; id?: number; metrics?: unknown; error?: string };

export function runPrimary(config: Config, logger: Logger): void {
  let stopping = false;
  // Only a process that once started is replaced when it dies; one that fails at start-up (bad
  // settings, wrong KEY_ENCRYPTION_KEY) would fail again, so the whole service stops instead.
  // Only started processes are asked for metrics: one still starting cannot answer yet.
  const started = new Set<number>();
  let nextCollection = 0;
  const collections = new Map<number, (worker: Worker, metrics: unknown) => void>();

  /** The sum over every started process (gauges by their declared aggregator). */
  const aggregate = async (): Promise<string> => {
    const id = ++nextCollection;
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w && started.has(w.id) && w.isConnected());
    const replies: unknown[] = [];
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, COLLECT_TIMEOUT_MS);
      let pending = workers.length;
      if (pending === 0) return resolve();
      collections.set(id, (_worker, metrics) => {
        replies.push(metrics);
        if (--pending === 0) {
          clearTimeout(timer);
          resolve();
        }
      });
      for (const worker of workers) worker.send({ type: LOCAL_METRICS_REQUEST, id });
    });
    collections.delete(id);
    return client.AggregatorRegistry.aggregate(replies as Parameters<typeof client.AggregatorRegistry.aggregate>[0]).metrics();
  };

  const fork = (): Worker => {
    const worker = cluster.fork();
    worker.on('message', (message: Message) => {
      if (message?.type === READY_MESSAGE) started.add(worker.id);
      else if (message?.type === LOCAL_METRICS_RESPONSE && message.id !== undefined) collections.get(message.id)?.(worker, message.metrics);
      else if (message?.type === METRICS_REQUEST) {
        aggregate().then(
          (body) => worker.send({ type: METRICS_RESPONSE, id: message.id, body, contentType: client.register.contentType }),
          (error: Error) => worker.send({ type: METRICS_RESPONSE, id: message.id, error: error.message }),
        );
      }
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
