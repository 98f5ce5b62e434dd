// Structured JSON logs (pino). Redaction is a second line of defence: code never passes secrets to the
// logger in the first place.
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';

export const REDACT_PATHS = [
  'secret',
  '*.secret',
  'admin_token',
  '*.admin_token',
  'authorization',
  '*.authorization',
  'headers.authorization',
  'req.headers.authorization',
  'privateKey',
  '*.privateKey',
  'private_key',
  '*.private_key',
  'privateKeyPem',
  '*.privateKeyPem',
  'password',
  '*.password',
  'databaseUrl',
  'redisUrl',
];

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    base: { pid: process.pid },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
}

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return destination ? pino(loggerOptions(level), destination) : pino(loggerOptions(level));
}

export type { Logger };
