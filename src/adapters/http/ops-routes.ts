// Operational endpoints on the internal port: liveness, readiness and Prometheus metrics.
import type { Route } from './types.js';

export interface OpsDeps {
  ready: () => Promise<{ ready: boolean; checks: Record<string, unknown> }>;
  metrics: () => Promise<{ contentType: string; body: string }>;
}

export function opsRoutes(deps: OpsDeps): Route[] {
  return [
    {
      method: 'GET', path: '/healthz', name: 'healthz',
      handler: () => ({ status: 200, headers: { 'Content-Type': 'application/json' }, body: '{"status":"ok"}' }),
    },
    {
      method: 'GET', path: '/readyz', name: 'readyz',
      handler: async () => {
        const { ready, checks } = await deps.ready();
        return {
          status: ready ? 200 : 503,
          headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...(ready ? {} : { 'Retry-After': '1' }) },
          body: JSON.stringify({ status: ready ? 'ready' : 'not_ready', checks }),
        };
      },
    },
    {
      method: 'GET', path: '/metrics', name: 'metrics',
      handler: async () => {
        const { contentType, body } = await deps.metrics();
        return { status: 200, headers: { 'Content-Type': contentType }, body };
      },
    },
  ];
}
