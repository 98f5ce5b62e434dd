// The crypto worker pools' series, per pool (argon2, sign): task time on a thread, tasks refused or
// failed, threads replaced. The queue depth reads the pools' waiting lines and is declared with them
// (pools.ts).
import client from 'prom-client';

export type PoolName = 'argon2' | 'sign';

export interface PoolMetricsOptions {
  registry: client.Registry;
}

export class PoolMetrics {
  private readonly taskDuration: client.Histogram<'pool'>;
  private readonly rejected: client.Counter<'pool'>;
  private readonly replaced: client.Counter<'pool'>;

  constructor({ registry }: PoolMetricsOptions) {
    const registers = [registry];
    this.taskDuration = new client.Histogram({
      name: 'ace_worker_task_duration_seconds',
      help: 'Crypto task time on a thread (dispatch to answer; the wait in line is not included), per pool.',
      labelNames: ['pool'],
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2.5],
      registers,
    });
    this.rejected = new client.Counter({
      name: 'ace_worker_tasks_rejected_total',
      help: 'Crypto tasks refused (queue full) or failed (worker crashed or hung), per pool.',
      labelNames: ['pool'],
      registers,
    });
    this.replaced = new client.Counter({
      name: 'ace_worker_threads_replaced_total',
      help: 'Crypto worker threads stopped and replaced because a task crashed or overran its deadline, per pool.',
      labelNames: ['pool'],
      registers,
    });
    for (const pool of ['argon2', 'sign'] satisfies PoolName[]) {
      this.rejected.inc({ pool }, 0);
      this.replaced.inc({ pool }, 0);
    }
  }

  observeWorkerTask(pool: PoolName, seconds: number): void {
    this.taskDuration.observe({ pool }, seconds);
  }

  workerTaskRejected(pool: PoolName): void {
    this.rejected.inc({ pool });
  }

  workerThreadReplaced(pool: PoolName): void {
    this.replaced.inc({ pool });
  }
}
