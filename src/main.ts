// Entry point: validate configuration, refuse a non-native uWS, start, and stop gracefully on SIGTERM.
import { loadConfig, ConfigError } from './config/config.js';
import { createLogger } from './log/logger.js';
import { assertNativeUws } from './http/server.js';
import { startApp } from './app.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw error;
  }
  const logger = createLogger(config.logLevel);
  try {
    assertNativeUws();
    const app = await startApp({ config, logger });
    const publicHost = config.host === '0.0.0.0' ? '127.0.0.1' : config.host;
    logger.info(
      {
        public_url: `http://${publicHost}:${app.publicPort}`,
        internal_url: `http://${config.adminHost}:${app.adminPort}`,
        admin_token_file: app.adminTokenPath ?? '(ADMIN_TOKEN is set)',
        database: config.databaseUrl ? 'postgres (DATABASE_URL)' : `embedded PGlite in ${config.dataDir}`,
        cache: config.redisUrl ? 'redis (REDIS_URL)' : 'in-process',
      },
      'agent credential exchange ready',
    );
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'shutting down');
      const force = setTimeout(() => {
        logger.error('shutdown deadline passed; exiting');
        process.exit(1);
      }, config.shutdownTimeoutMs + 2000);
      force.unref();
      app.shutdown().then(
        () => {
          logger.info('stopped');
          process.exit(0);
        },
        (error) => {
          logger.error({ err: { message: (error as Error).message } }, 'shutdown failed');
          process.exit(1);
        },
      );
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
  } catch (error) {
    logger.fatal({ err: { message: (error as Error).message, name: (error as Error).name } }, 'failed to start');
    process.exit(1);
  }
}

void main();
