// Cluster mode (WORKERS > 1), the primary's side: it forks one HTTP process per worker (each with its own
// uWS listeners on the shared ports, via SO_REUSEPORT, and its own crypto pools), replaces a process that
// dies, answers /metrics requests with the sum over every process, and fans SIGTERM out for a graceful
// stop. The worker's side is in worker.ts; the messages between them in messages.ts.
import cluster, { type Worker } from 'node:cluster';
import client from 'prom-client';
import type { Config } from '../../config/config.js';
import type { Logger } from '../../adapters/telemetry/logger.js';
import { COLLECT_TIMEOUT_MS, LOCAL_METRICS_REQUEST, LOCAL_METRICS_RESPONSE, METRICS_REQUEST, METRICS_RESPONSE, READY_MESSAGE, type Message } from './messages.js';


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
    // The same signal: a SIGTERM'd service drains in every worker, a Ctrl-C stops them at once.
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill(signal);
    setTimeout(() => {
      logger.error('workers did not stop in time; exiting');
      process.exit(1);
    }, config.shutdownDrainSeconds * 1000 + config.shutdownTimeoutMs + 4000).unref();
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(process.exitCode ?? 0);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
