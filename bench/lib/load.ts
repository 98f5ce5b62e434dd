// Thin wrapper over autocannon's programmatic API. autocannon runs inside the bench process (no `workers`
// option), so on a 2-core machine it competes with the server for CPU: every figure here includes that cost.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
// autocannon ships no types; the few fields used here are typed below.
const autocannon = require('autocannon') as (opts: Record<string, unknown>, cb?: (err: Error | null, result: RawResult) => void) => Instance;

interface Instance {
  stop(): void;
  on(event: string, listener: (...args: any[]) => void): void;
}

interface RawResult {
  duration: number;
  requests: { total: number; average: number };
  latency: { p50: number; p99: number; average: number; max: number };
  errors: number;
  timeouts: number;
  non2xx: number;
  '2xx': number;
  statusCodeStats?: Record<string, { count: number }>;
}

export interface RequestSpec {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
  /** Called before every request of a connection; returns the request to send (see autocannon `requests`). */
  setupRequest?: (req: Record<string, unknown>) => Record<string, unknown>;
  /** Called with every answer (status, body); makes autocannon keep the body, so only for the soak. */
  onResponse?: (status: number, body: string) => void;
}

export interface LoadOptions {
  url: string;
  connections: number;
  duration: number;
  /** One request repeated, or a list each connection walks through in order. */
  requests: RequestSpec[];
  /**
   * Stops after this many requests instead of after `duration` (which then only bounds the run). The run's
   * seconds are then timed to its last answer: autocannon notices the end only at its next 1-second sample,
   * which would round every such run up to whole seconds (5,000 answers in 2.1 s read as 1,000/s).
   */
  amount?: number;
  /** Caps the request rate (req/s over all connections); unset = as fast as the server answers. */
  overallRate?: number;
  /** Lets the caller stop the run early (e.g. the pool of cold agents ran out). */
  onStart?: (stop: () => void) => void;
  /** Every transport error or timeout (no answer). */
  onError?: (error: Error) => void;
  /**
   * Runs the load in this many worker threads of its own (autocannon `workers`) instead of this event loop:
   * a flood measured beside another load must not slow that load's client (plain-data requests only).
   */
  workers?: number;
}

export interface LoadResult {
  /** Completed requests per second over the measured time. */
  rps: number;
  requests: number;
  ok2xx: number;
  /** Non-2xx answers. */
  non2xx: number;
  /** Connection errors and timeouts (no answer at all). */
  errors: number;
  p50: number;
  p99: number;
  meanMs: number;
  seconds: number;
  statusCodes: Record<string, number>;
}

export function load(options: LoadOptions): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let lastAnswer = started;
    const instance = autocannon(
      {
        url: options.url,
        connections: options.connections,
        duration: options.duration,
        pipelining: 1,
        timeout: 10,
        requests: options.requests,
        ...(options.overallRate ? { overallRate: options.overallRate } : {}),
        ...(options.amount ? { amount: options.amount } : {}),
        ...(options.workers ? { workers: options.workers } : {}),
      },
      (err, raw) => {
        if (err) return reject(err);
        const statusCodes: Record<string, number> = {};
        for (const [code, stat] of Object.entries(raw.statusCodeStats ?? {})) statusCodes[code] = stat.count;
        const seconds = options.amount ? (lastAnswer - started) / 1000 : raw.duration;
        resolve({
          rps: seconds > 0 ? raw.requests.total / seconds : 0,
          requests: raw.requests.total,
          ok2xx: raw['2xx'],
          non2xx: raw.non2xx,
          errors: raw.errors + raw.timeouts,
          p50: raw.latency.p50,
          p99: raw.latency.p99,
          meanMs: raw.latency.average,
          seconds,
          statusCodes,
        });
      },
    );
    if (options.amount) instance.on('response', () => (lastAnswer = performance.now()));
    if (options.onError) instance.on('reqError', options.onError);
    options.onStart?.(() => instance.stop());
  });
}

/** Warm-up (discarded) then the measurement, with the same requests. */
export async function measure(options: LoadOptions & { warmup: number; beforeMeasure?: () => Promise<void> }): Promise<LoadResult> {
  if (options.warmup > 0) await load({ ...options, duration: options.warmup });
  await options.beforeMeasure?.();
  return load(options);
}
