// What every scenario gets: the options, a logger on stderr, clean-up registration, the machine's limits
// (measured once, shared) and a place for its report.
import os from 'node:os';
import type { BenchOptions } from './args.js';
import type { Check } from './checks.js';
import { machineInfo } from './report.js';

export interface ScenarioReport {
  /** Scenario name (the --only key). */
  name: string;
  /** Text blocks printed in the final output, in order. */
  text: string[];
  /** Target checks, judged on the medians of rounds. */
  checks: Check[];
  /** Anything worth keeping in the result file. */
  data: Record<string, unknown>;
  /** A run that must fail the command (the soak's failures): the runner exits 1. */
  failed?: boolean;
}

export class BenchContext {
  readonly started = Date.now();
  readonly machine = machineInfo();
  private readonly cleanups: (() => Promise<void>)[] = [];

  constructor(readonly opts: BenchOptions) {}

  log(message: string): void {
    const seconds = ((Date.now() - this.started) / 1000).toFixed(0).padStart(3);
    process.stderr.write(`[bench ${seconds}s] ${message}\n`);
  }

  /** Runs `fn` at clean-up time (last registered, first run). */
  defer(fn: () => Promise<void> | void): void {
    this.cleanups.push(async () => fn());
  }

  async cleanup(): Promise<void> {
    while (this.cleanups.length > 0) await this.cleanups.pop()!().catch((e) => this.log(`cleanup: ${e}`));
  }

  /** Runs `body` with its own clean-ups, run when it ends (a scenario's services stop before the next starts). */
  async scoped<T>(body: (defer: (fn: () => Promise<void> | void) => void) => Promise<T>): Promise<T> {
    const mark = this.cleanups.length;
    try {
      return await body((fn) => this.defer(fn));
    } finally {
      while (this.cleanups.length > mark) await this.cleanups.pop()!().catch((e) => this.log(`cleanup: ${e}`));
    }
  }

  /** 1-minute load average now: > 1 on 2 cores means other work shares the CPU and figures are low. */
  load(): number {
    return Number(os.loadavg()[0].toFixed(2));
  }
}
