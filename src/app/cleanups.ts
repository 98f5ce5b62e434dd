// What a started service must undo, run in reverse order of start (servers before pools before stores).
import type { Logger } from '../adapters/telemetry/logger.js';

export class Cleanups {
  private readonly steps: (() => Promise<unknown> | unknown)[] = [];

  add(step: () => Promise<unknown> | unknown): void {
    this.steps.push(step);
  }

  /** Runs every step, last added first; a failing step is logged and the others still run. */
  async run(logger: Logger): Promise<void> {
    for (const step of this.steps.splice(0).reverse()) {
      try {
        await step();
      } catch (error) {
        logger.warn({ err: { message: (error as Error).message } }, 'cleanup step failed');
      }
    }
  }
}
