// Composition root of one service process: stores, domain services and the two HTTP listeners (public and
// internal), wired from the validated configuration. Each step is a module of this folder.
import type { Config } from '../config/config.js';
import type { Logger } from '../adapters/telemetry/logger.js';
import { createMetrics, localMetricsText } from './metrics.js';
import type client from 'prom-client';
import { resolveAdminToken } from './admin-token.js';
import { Cleanups } from './cleanups.js';
import { startStores } from './stores.js';
import { startDomain } from './domain.js';
import { createServers, type Servers } from './servers.js';

/** The Postgres pools' close bounds (2 s each, the store's and the audit trail's) after the spool's drain. */
const POOL_CLOSE_RESERVE_MS = 4000;

export interface RunningApp {
  publicPort: number;
  adminPort: number;
  adminTokenPath?: string;
  /**
   * Graceful stop: not ready at once, serve on for SHUTDOWN_DRAIN_SECONDS when `drain` (SIGTERM: a balancer
   * may still route here), stop accepting, finish in-flight work, close everything.
   */
  shutdown(drain: boolean): Promise<void>;
}

export interface AppOptions {
  config: Config;
  logger: Logger;
  /** Cluster workers pass a collector that answers /metrics with the sum over every process. */
  metricsText?: (local: client.Registry) => () => Promise<{ contentType: string; body: string }>;
  /** A cluster's processes share their ports (SO_REUSEPORT); a single process holds them exclusively. */
  sharedPorts?: boolean;
}

export async function startApp({ config, logger, metricsText, sharedPorts = false }: AppOptions): Promise<RunningApp> {
  const metrics = createMetrics({ logger });
  const cleanups = new Cleanups();
  let shuttingDown = false;
  let servers: Servers | undefined;
  try {
    const stores = await startStores(config, logger, metrics, cleanups);
    const domain = await startDomain(config, logger, metrics, stores, cleanups);
    const admin = resolveAdminToken(config);
    servers = createServers(
      {
        config, logger, metrics, stores, domain,
        adminToken: admin.token,
        metricsText: (metricsText ?? localMetricsText)(metrics.registry),
        shuttingDown: () => shuttingDown,
      },
      cleanups,
    );
    const publicPort = await servers.public.listen(config.host, config.port, sharedPorts);
    const adminPort = await servers.admin.listen(config.adminHost, config.adminPort, sharedPorts);
    metrics.health.setReady(true);
    const started = servers;
    return {
      publicPort,
      adminPort,
      adminTokenPath: admin.path,
      async shutdown(drain: boolean) {
        if (shuttingDown) return;
        shuttingDown = true;
        metrics.health.setReady(false);
        // The drain: /readyz says 503 from now on, and both listeners keep serving until load balancers
        // that poll it have moved off; only then do they close (a closed port behind a balancer is a 502).
        if (drain && config.shutdownDrainSeconds > 0) {
          logger.info({ drain_seconds: config.shutdownDrainSeconds }, 'not ready; serving on while load balancers move off');
          started.public.closeConnectionsAfterAnswers();
          started.admin.closeConnectionsAfterAnswers();
          await new Promise((resolve) => setTimeout(resolve, config.shutdownDrainSeconds * 1000));
        }
        started.public.stopAccepting();
        const finishing = Date.now();
        await started.public.idle(config.shutdownTimeoutMs);
        started.public.closeAll();
        started.admin.closeAll();
        // What is left of SHUTDOWN_TIMEOUT_MS, less what closing the pools may take, goes to the audit spool:
        // a pod must not take events to its deletion that Postgres could take now (the process's hard
        // deadline and the pod's grace period already allow for the whole timeout).
        const drainWithinMs = Math.max(0, config.shutdownTimeoutMs - (Date.now() - finishing) - POOL_CLOSE_RESERVE_MS);
        // Closing the trail writes the refusal window's aggregates first (app/audit.ts).
        await domain.audit.close({ drainWithinMs });
        await cleanups.run(logger);
      },
    };
  } catch (error) {
    // A listener that did start (the public one, when the admin port is taken) must not outlive the failure.
    servers?.public.closeAll();
    servers?.admin.closeAll();
    await cleanups.run(logger);
    throw error;
  }
}
