// One log line per interval for a message that can repeat many times a second (a full Redis fails every
// cache write, and each failure flips the cache's trust): the first occurrence is logged at once, the
// repeats within the interval are counted and logged as one line (`repeated`) when it ends.
import type { Logger } from 'pino';

export interface ThrottledLogOptions {
  logger: Pick<Logger, 'info' | 'warn'>;
  intervalMs: number;
}

interface Held {
  level: 'info' | 'warn';
  fields: Record<string, unknown>;
  count: number;
}

export class ThrottledLog {
  private readonly options: ThrottledLogOptions;
  /** When each message was last written. */
  private readonly lastAt = new Map<string, number>();
  /** Repeats of each message waiting for the end of its interval. */
  private readonly held = new Map<string, Held>();

  constructor(options: ThrottledLogOptions) {
    this.options = options;
  }

  log(level: 'info' | 'warn', fields: Record<string, unknown>, message: string): void {
    const now = Date.now();
    const last = this.lastAt.get(message);
    const held = this.held.get(message);
    if (held) {
      held.count++;
      held.fields = fields;
      return;
    }
    if (last === undefined || now - last >= this.options.intervalMs) {
      this.lastAt.set(message, now);
      this.options.logger[level](fields, message);
      return;
    }
    this.held.set(message, { level, fields, count: 1 });
    setTimeout(() => this.release(message), last + this.options.intervalMs - now).unref();
  }

  private release(message: string): void {
    const held = this.held.get(message);
    if (!held) return;
    this.held.delete(message);
    this.lastAt.set(message, Date.now());
    this.options.logger[held.level]({ ...held.fields, repeated: held.count, interval_ms: this.options.intervalMs }, message);
  }
}
