// What the entry point (main.ts) runs once the thread pool is sized: validate configuration, refuse a non-native uWS, start one process (or a cluster of
// WORKERS processes), and stop gracefully on SIGTERM.
import cluster from 'node:cluster';
import { loadConfig, ConfigError, type Config } from '../config/config.js';
import { redisTopologyKind } from '../config/redis-settings.js';
import { createLogger, type Logger } from '../adapters/telemetry/logger.js';
import { tolerateDroppedStoreErrors } from '../adapters/telemetry/dropped-store-errors.js';
import { isDriverStoreFailure } from '../adapters/postgres/errors.js';
import { assertNativeUws } from '../adapters/http/server.js';
import { startApp } from './start-app.js';
import { READY_MESSAGE } from './cluster/messages.js';
import { runPrimary } from './cluster/primary.js';
import { assertPortsFree } from './port-check.js';
import { clusterMetricsText } from './cluster/worker.js';

function readConfig(): Config {
  try {
    return loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw error;
  }
}

async function runServer(config: Config, logger: Logger): Promise<void> {
  tolerateDroppedStoreErrors({ logger, isStoreFailure: isDriverStoreFailure });
  const inCluster = cluster.isWorker;
  const app = await startApp({ config, logger, sharedPorts: inCluster, metricsText: inCluster ? clusterMetricsText : undefined });
  // The URL the service says it is (PUBLIC_BASE_URL) and the tokens' iss, exactly as the tokens carry them:
  // a client configured from this log accepts the tokens.
  logger.info(
    {
      public_url: config.publicBaseUrl,
      issuer: config.issuer,
      listening: `${config.host}:${app.publicPort}`,
      internal_url: `http://${config.adminHost}:${app.adminPort}`,
      admin_token_file: app.adminTokenPath ?? '(ADMIN_TOKEN is set)',
      database: config.databaseUrl ? 'postgres (DATABASE_URL)' : `embedded PGlite in ${config.dataDir}`,
      cache: redisTopologyKind(config) ? `redis (${redisTopologyKind(config)})` : 'in-process',
      workers: config.workers,
    },
    'agent credential exchange ready',
  );
  if (inCluster) process.send!({ type: READY_MESSAGE });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    setTimeout(() => {
      logger.error('shutdown deadline passed; exiting');
      process.exit(1);
    }, config.shutdownDrainSeconds * 1000 + config.shutdownTimeoutMs + 2000).unref();
    // SIGTERM is how orchestrators and balancers' hosts stop a process: drain. Ctrl-C (SIGINT) at a terminal
    // and a cluster primary's death stop at once.
    app.shutdown(signal === 'SIGTERM').then(
      () => {
        logger.info('stopped');
        logger.flush?.();
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
  // In a cluster, the primary's death must not leave orphans serving.
  if (inCluster) process.on('disconnect', () => stop('primary gone'));
}

async function main(): Promise<void> {
  const config = readConfig();
  const logger = createLogger(config.logLevel);
  try {
    assertNativeUws();
    // A cluster's processes share the ports the primary found free; a process of its own checks them itself.
    if (cluster.isPrimary) {
      await assertPortsFree([
        { settings: 'HOST/PORT', host: config.host, port: config.port },
        { settings: 'ADMIN_HOST/ADMIN_PORT', host: config.adminHost, port: config.adminPort },
      ]);
    }
    if (config.workers > 1 && cluster.isPrimary) return runPrimary(config, logger);
    await runServer(config, logger);
  } catch (error) {
    logger.fatal({ err: { message: (error as Error).message, name: (error as Error).name } }, 'failed to start');
    process.exit(1);
  }
}

void main();
