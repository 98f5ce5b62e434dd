// The two Piscina pools: argon2 (slow, bounded queue so a flood of cold credentials is shed with 503)
// and signing (fed in batches by the SignBatcher). Separate pools so warm-credential requests never wait
// behind argon2 work.
//
// A fresh instance slow-starts: for WARMUP_SECONDS its argon2 line stretches to what the pool verifies in
// WARMUP_MAX_WAIT_MS (a new pod gets its full share of a fleet at once, and agents that no instance has
// verified yet, after a Redis flush for instance, all need argon2): a cold check that finds the usual line
// full waits up to that bound instead of a 503 at once, and gets the 503 only if it could not be served
// within it.
import { Piscina } from 'piscina';
import client from 'prom-client';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { busy, type ServiceError } from '../../core/errors.js';
import type { HashTask, VerifyTask } from '../../../workers/crypto-worker.js';
import { unpackTokens, type SignTask } from '../../../workers/sign-protocol.js';
import type { TokenType } from '../../core/ports/crypto.js';
import { SignBatcher } from './sign-batcher.js';
import { WaitingLine } from './waiting-line.js';
import { PoolCapacity, RetrySpread } from './retry-spread.js';
import { ThreadSlots } from './thread-slots.js';
import type { PoolMetrics, PoolName } from './pool-metrics.js';

const WORKER_FILE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../workers/crypto-worker.js');

export interface PoolOptions {
  argon2Threads: number;
  argon2MaxQueue: number;
  signThreads: number;
  signMaxQueue: number;
  argon2TaskTimeoutMs: number;
  signTaskTimeoutMs: number;
  /** How long after start the argon2 line stretches (0: never). */
  warmupSeconds: number;
  /** The longest a cold check waits in the stretched line. */
  warmupMaxWaitMs: number;
}

export interface CryptoPoolsOptions extends PoolOptions {
  metrics: PoolMetrics;
  /** Where the queue depth is declared (it reads the pools' waiting lines). */
  registry: client.Registry;
}

/**
 * The longest argon2 Retry-After: the agent client's default patience (`maxRetryDelaySeconds` 60). A fleet
 * whose checks take longer than this to work through gets one refusal per minute at most instead of one
 * per 30 s, so the client's default 3 retries carry it through about 4 minutes of backlog.
 */
const ARGON2_RETRY_AFTER_MAX_SECONDS = 60;

interface Argon2Call {
  name: 'verifySecret' | 'hashSecret';
  task: VerifyTask | HashTask;
}

export class CryptoPools {
  private readonly pools: Record<PoolName, Piscina>;
  /** A task that did not finish in this long is treated as a hung worker: aborting it replaces the thread. */
  private readonly taskTimeoutMs: Record<PoolName, number>;
  /** Loaded, free threads: a task's deadline starts only once it has one (thread-slots.ts). */
  private readonly slots: Record<PoolName, ThreadSlots>;
  private readonly signBatcher: SignBatcher;
  /** argon2 work waits here, not in Piscina: a client hanging up must not stop a running task (waiting-line.ts). */
  private readonly argon2Line: WaitingLine<Argon2Call, unknown>;
  /** argon2 verifications a second the pool can do. */
  private readonly argon2Capacity: PoolCapacity;
  /** The Retry-After of argon2 work shed, booked at the pool's capacity (retry-spread.ts). */
  private readonly argon2Retry: RetrySpread;
  private readonly metrics: PoolMetrics;
  private closing = false;

  constructor(options: CryptoPoolsOptions) {
    const { metrics } = options;
    this.metrics = metrics;
    this.taskTimeoutMs = { argon2: options.argon2TaskTimeoutMs, sign: options.signTaskTimeoutMs };
    this.slots = { argon2: new ThreadSlots({ threads: options.argon2Threads }), sign: new ThreadSlots({ threads: options.signThreads }) };
    // Tasks never queue inside Piscina (one per thread at most): the waiting lines are ours.
    const make = (pool: PoolName, threads: number) => {
      const piscina = new Piscina({
        filename: WORKER_FILE,
        minThreads: threads,
        maxThreads: threads,
        idleTimeout: 60_000,
        // One task at a time per thread: argon2 runs synchronously, and a sign task is a whole batch.
        concurrentTasksPerWorker: 1,
      });
      // Piscina stops a thread only when its task crashed or overran its deadline (min = max threads), and
      // starts its replacement at once; it says 'workerCreate' for a replacement once it has loaded.
      piscina.on('workerDestroy', () => {
        if (this.closing) return;
        metrics.workerThreadReplaced(pool);
        this.slots[pool].threadStopped();
      });
      piscina.on('workerCreate', () => this.slots[pool].threadLoaded());
      return piscina;
    };
    this.pools = {
      argon2: make('argon2', options.argon2Threads),
      sign: make('sign', options.signThreads),
    };
    // The thread answers a batch in one transferred buffer (sign-protocol.ts).
    const signBatch = async (batch: SignTask[]) => unpackTokens(await this.run<ArrayBuffer>('sign', 'signTokens', batch));
    this.signBatcher = new SignBatcher({ runBatch: signBatch, threads: options.signThreads, maxPending: options.signMaxQueue, full: () => this.shed('sign') });
    // Before any task ran, assume ~25 ms per verification per thread.
    const argon2 = this.pools.argon2;
    this.argon2Capacity = new PoolCapacity({
      threads: options.argon2Threads,
      takeMeanRunMs: () => {
        // The mean, not the median: busy threads finish threads / mean run time tasks a second, and under
        // CPU contention the slow (preempted) runs are the ones the median leaves out.
        const ms = argon2.histogram.runTime.mean;
        argon2.histogram.resetRunTime();
        // Under 1 ms the window held only readiness pings (a verification takes tens of ms): no estimate.
        return ms >= 1 ? ms : NaN;
      },
      initialPerThread: 40,
    });
    const capacity = this.argon2Capacity;
    this.argon2Retry = new RetrySpread({ maxSeconds: ARGON2_RETRY_AFTER_MAX_SECONDS, overbook: 1.2, rate: () => capacity.perSecond() });
    const warmUntil = performance.now() + options.warmupSeconds * 1000;
    this.argon2Line = new WaitingLine({
      run: async ([call]) => [await this.run('argon2', call.name, call.task)],
      slots: options.argon2Threads,
      maxWaiting: options.argon2MaxQueue,
      full: () => this.shed('argon2'),
      overflow: {
        maxWaitMs: options.warmupMaxWaitMs,
        // While warming up: as many as the pool verifies within the bound, the usual line included.
        places: () =>
          performance.now() < warmUntil ? Math.max(0, Math.floor((capacity.perSecond() * options.warmupMaxWaitMs) / 1000) - options.argon2MaxQueue) : 0,
      },
    });
    new client.Gauge({
      name: 'ace_argon2_warming_up',
      help: '1 while the instance slow-starts (WARMUP_SECONDS after start: cold checks may wait up to WARMUP_MAX_WAIT_MS), else 0.',
      registers: [options.registry],
      collect() {
        this.set(performance.now() < warmUntil ? 1 : 0);
      },
    });
    const lines = { argon2: this.argon2Line, sign: this.signBatcher };
    new client.Gauge({
      name: 'ace_worker_queue_depth',
      help: 'Tasks waiting for a crypto worker thread, per pool.',
      labelNames: ['pool'],
      registers: [options.registry],
      collect() {
        for (const [pool, line] of Object.entries(lines)) this.set({ pool }, line.queued);
      },
    });
  }

  async verifySecret(task: VerifyTask, signal?: AbortSignal): Promise<number> {
    return (await this.argon2Line.run({ name: 'verifySecret', task }, signal)) as number;
  }

  async hashSecret(secret: string, salt: Uint8Array): Promise<string> {
    return (await this.argon2Line.run({ name: 'hashSecret', task: { secret, salt } satisfies HashTask })) as string;
  }

  /** Signs with the key `kid`; its PEM crosses to a thread only the first time that thread needs it. */
  signToken(kid: string, privateKeyPem: string, payload: string, signal?: AbortSignal, typ?: TokenType): Promise<string> {
    return this.signBatcher.sign(kid, privateKeyPem, payload, signal, typ);
  }

  /**
   * True when a thread of each pool answers within `timeoutMs`. The pings skip the waiting lines (a long
   * line is load, not a fault) and carry no AbortSignal: one aborted just as a thread picked it up would
   * stop that thread. A ping still waiting at the deadline stays queued and runs when a thread frees.
   */
  async ping(timeoutMs = 1000): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const answered = Promise.all([this.pools.argon2.run(null, { name: 'ping' }), this.pools.sign.run(null, { name: 'ping' })]).then(
      () => true,
      () => false,
    );
    try {
      return await Promise.race([answered, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Resolves once every thread of both pools has loaded the worker module; call it before any task with a
   * deadline runs. Piscina hands tasks to the threads it starts with before they have loaded their module,
   * so a task deadline (ARGON2_TASK_TIMEOUT_MS) counted the module's loading, and overrunning it terminated a
   * thread in the middle of evaluating its ES module graph: V8 aborts the whole process there (fatal
   * `IsGraphAsync`, SIGABRT) — under CPU contention with a short deadline, at start-up or at the first hung
   * task — or start-up failed on the first argon2 task ("The service is busy"). The probes carry no
   * deadline (no thread is ever terminated for being slow to load) and name their thread, so every thread
   * is known to have answered. Threads started later (replacements) get tasks only once loaded: Piscina
   * waits for their ready message.
   */
  async loadAll(timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (const [pool, piscina] of Object.entries(this.pools)) {
      const answered = new Set<number>();
      while (answered.size < piscina.threads.length) {
        const left = deadline - performance.now();
        if (left <= 0) throw new Error(`the ${pool} worker threads did not load their module within ${timeoutMs} ms (${answered.size} of ${piscina.threads.length})`);
        const probes = Array.from({ length: piscina.threads.length - answered.size }, () => piscina.run(null, { name: 'loaded' }) as Promise<number>);
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<number[]>((resolve) => {
          timer = setTimeout(() => resolve([]), left);
        });
        try {
          for (const id of await Promise.race([Promise.all(probes), late])) answered.add(id);
        } finally {
          clearTimeout(timer);
        }
      }
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    await Promise.all([this.pools.argon2.close(), this.pools.sign.close()]);
  }

  /**
   * Throws the 503 a full argon2 queue answers, before the caller spends a store read and a limiter round
   * trip on a check that would be shed anyway (a restarting fleet is refused many times over).
   */
  refuseIfVerificationsFull(): void {
    if (this.argon2Line.isFull) throw this.shed('argon2');
  }

  /**
   * The 503 of a full waiting line, counted in ace_worker_tasks_rejected_total: argon2 callers are booked
   * into the coming seconds at the pool's rate, after the line has drained (a stretched line holds seconds of work).
   */
  private shed(pool: PoolName): ServiceError {
    this.metrics.workerTaskRejected(pool);
    return busy(pool === 'argon2' ? this.argon2Retry.next(this.argon2Line.queued / this.argon2Capacity.perSecond()) : 1);
  }

  /**
   * One task on a free thread (the waiting lines dispatch only then; a replacement thread still loading is
   * waited for, at most one deadline long). The deadline counts from there, so it bounds the task's run, not
   * its wait; it is the only signal Piscina sees: overrunning it stops the thread.
   */
  private async run<T>(pool: PoolName, name: string, task: unknown): Promise<T> {
    const piscina = this.pools[pool];
    const slots = this.slots[pool];
    if (!(await slots.take(this.taskTimeoutMs[pool]))) {
      // No thread loaded in time (they keep failing to start): as busy as a full queue.
      this.metrics.workerTaskRejected(pool);
      throw busy();
    }
    const started = performance.now();
    try {
      return (await piscina.run(task, { name, signal: AbortSignal.timeout(this.taskTimeoutMs[pool]) })) as T;
    } catch {
      // Worker crashed or hung (Piscina replaces the thread): the request gets a 503.
      this.metrics.workerTaskRejected(pool);
      throw busy();
    } finally {
      slots.release();
      this.metrics.observeWorkerTask(pool, (performance.now() - started) / 1000);
    }
  }
}
