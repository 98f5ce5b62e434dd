// Structured JSON logs (pino). Redaction is a second line of defence: code never passes secrets to the
// logger in the first place. It censors sensitive keys at any depth (redact.ts).
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { redactDeep } from './redact.js';

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    base: { pid: process.pid },
    // At any depth (see redact.ts); a child logger's bindings: createLogger below.
    formatters: {
      log: (object) => redactDeep(object),
    },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
}

export function createLogger(level: string, destination?: DestinationStream): Logger {
  const logger = destination ? pino(loggerOptions(level), destination) : pino(loggerOptions(level));
  // pino applies no formatter to a child's bindings: redact them on the way in. Children inherit this
  // method from the root (they are created with Object.create), so grandchildren are covered too.
  const child = logger.child;
  logger.child = function (this: Logger, bindings, options) {
    return child.call(this, redactDeep(bindings), options);
  } as Logger['child'];
  return logger;
}

export type { Logger };
