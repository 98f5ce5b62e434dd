// Operational endpoints on the internal port: liveness, readiness and Prometheus metrics.
import { Type } from '@sinclair/typebox';
import { refusals } from './responses.js';
import { bindRoutes, type Route, type RouteDeclaration } from './types.js';

export interface OpsDeps {
  ready: () => Promise<{ ready: boolean; checks: Record<string, unknown> }>;
  metrics: () => Promise<{ contentType: string; body: string }>;
}

const Readiness = Type.Object(
  {
    status: Type.Union([Type.Literal('ready'), Type.Literal('not_ready')]),
    checks: Type.Record(Type.String(), Type.Union([Type.Boolean(), Type.String()])),
  },
  { $id: 'Readiness' },
);

export const opsRouteTable = {
  healthz: {
    method: 'GET', path: '/healthz', name: 'healthz', operationId: 'getHealth',
    summary: 'Liveness: the process answers',
    auth: 'none',
    audit: { kind: 'none' },
    responses: {
      200: { description: 'Alive.', content: { 'application/json': Type.Object({ status: Type.Literal('ok') }) } },
      ...refusals({ method_not_allowed: '' }),
    },
  },
  readyz: {
    method: 'GET', path: '/readyz', name: 'readyz', operationId: 'getReadiness',
    summary: 'Readiness: can serve tokens (a signing key, the worker pools, and the Postgres primary or, while it is away, the Redis cache); `checks.degraded` names what it serves without',
    auth: 'none',
    audit: { kind: 'none' },
    responses: {
      200: { description: 'Ready.', content: { 'application/json': Readiness } },
      503: {
        description: 'Not ready: nothing to serve from, or shutting down (the drain); `checks` says which part is missing.',
        headers: { 'Retry-After': { schema: Type.Literal('1') } },
        content: { 'application/json': Readiness },
      },
      ...refusals({ method_not_allowed: '' }),
    },
  },
  metrics: {
    method: 'GET', path: '/metrics', name: 'metrics', operationId: 'getMetrics',
    summary: 'Prometheus metrics (text exposition format)',
    auth: 'none',
    audit: { kind: 'none' },
    responses: {
      200: { description: 'Metrics of this process (a cluster worker answers with the sum over every process).', content: { 'text/plain': Type.String() } },
      ...refusals({ method_not_allowed: '' }),
    },
  },
} satisfies Record<string, RouteDeclaration>;

export function opsRoutes(deps: OpsDeps): Route[] {
  return bindRoutes(opsRouteTable, {
    healthz: () => ({ status: 200, headers: { 'Content-Type': 'application/json' }, body: '{"status":"ok"}' }),
    readyz: async () => {
      const { ready, checks } = await deps.ready();
      return {
        status: ready ? 200 : 503,
        headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...(ready ? {} : { 'Retry-After': '1' }) },
        body: JSON.stringify({ status: ready ? 'ready' : 'not_ready', checks }),
      };
    },
    metrics: async () => {
      const { contentType, body } = await deps.metrics();
      return { status: 200, headers: { 'Content-Type': contentType }, body };
    },
  });
}
