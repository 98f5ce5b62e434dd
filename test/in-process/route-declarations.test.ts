// Route declarations as the server reads them: a declared auth kind is enforced by the listener's guard
// before the handler (and a listener without that guard refuses to start), a declared body is read, and
// every declaration of both listeners is complete enough to document.
import { OAuthErrorBody } from '../../src/adapters/http/schemas/oauth.js';
import { describe, expect, it } from 'vitest';
import { HttpServer } from '../../src/adapters/http/server.js';
import { bindRoutes, json, type Route, type RouteDeclaration } from '../../src/adapters/http/types.js';
import { ServiceError } from '../../src/core/errors.js';
import client from 'prom-client';
import { HttpMetrics } from '../../src/adapters/http/http-metrics.js';
import { createLogger } from '../../src/adapters/telemetry/logger.js';
import { NO_PROXY } from '../../src/support/client-address.js';
import { internalRouteDeclarations, publicRouteDeclarations } from '../../src/adapters/http/openapi/api-documents.js';
import { Type } from '@sinclair/typebox';
import { ErrorBody } from '../../src/adapters/http/schemas/public.js';

const options = { name: 'test', maxBodyBytes: 1024, proxy: NO_PROXY, metrics: new HttpMetrics({ registry: new client.Registry() }), logger: createLogger('silent'), accessLog: false };
const declared = (d: Partial<RouteDeclaration> & Pick<RouteDeclaration, 'method' | 'path' | 'name'>): RouteDeclaration => ({
  summary: d.name,
  auth: 'none',
  audit: { kind: 'none' },
  responses: { 200: { description: 'ok' } },
  ...d,
});

describe('route declarations read by the server', () => {
  it('a route that declares admin_bearer is refused at construction by a listener without that guard', () => {
    const routes = bindRoutes({ secret: declared({ method: 'GET', path: '/secret', name: 'secret', auth: 'admin_bearer' }) }, { secret: () => json(200, {}) });
    expect(() => new HttpServer({ ...options, routes })).toThrow(/declares auth "admin_bearer"/);
  });

  it('runs the guard (with Authorization and the body read) before the handler, and only on routes that declare it', async () => {
    const handled: string[] = [];
    const routes: Route[] = bindRoutes(
      {
        guarded: declared({ method: 'POST', path: '/guarded', name: 'guarded', auth: 'admin_bearer', body: { schema: Type.Object({}), contentType: 'application/json', required: true } }),
        open: declared({ method: 'GET', path: '/open', name: 'open' }),
      },
      {
        guarded: (r) => {
          handled.push(`guarded ${r.body?.toString()}`);
          return json(200, { ok: true });
        },
        open: (r) => {
          handled.push(`open ${r.headers.authorization === '' ? 'no-authorization' : 'authorization-read'}`);
          return json(200, { ok: true });
        },
      },
    );
    const server = new HttpServer({
      ...options,
      routes,
      guards: {
        admin_bearer: (r) => {
          if (r.headers.authorization !== 'Bearer right') throw new ServiceError('unauthorized');
        },
      },
    });
    const port = await server.listen('127.0.0.1', 0);
    try {
      const post = (authorization: string) =>
        fetch(`http://127.0.0.1:${port}/guarded`, { method: 'POST', headers: { authorization, 'content-type': 'application/json' }, body: '{"a":1}' });
      const refused = await post('Bearer wrong');
      expect(refused.status).toBe(401);
      expect(await refused.json()).toMatchObject({ error_code: 'unauthorized' });
      expect(handled).toEqual([]);
      expect((await post('Bearer right')).status).toBe(200);
      expect((await fetch(`http://127.0.0.1:${port}/open`, { headers: { authorization: 'Bearer right' } })).status).toBe(200);
      expect(handled).toEqual(['guarded {"a":1}', 'open no-authorization']);
    } finally {
      server.closeAll();
    }
  });
});

describe('the declarations of both listeners', () => {
  const all = [...publicRouteDeclarations('agnt_kid_'), ...internalRouteDeclarations()];

  it('name a schema for every path parameter, and an operationId, once each, for every documented route', () => {
    for (const route of all) {
      const params = [...route.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]);
      expect(Object.keys(route.params ?? {}).sort(), `${route.method} ${route.path}`).toEqual(params.sort());
    }
    const ids = all.filter((r) => r.method !== 'ANY').map((r) => r.operationId);
    expect(ids.every((id) => typeof id === 'string')).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('document at least one refusal in the Error shape for every route (the contract answers every failure so)', () => {
    expect(Object.keys(OAuthErrorBody.properties)).toEqual(expect.arrayContaining(['error', 'error_description', 'detail', 'error_code']));
    for (const route of all) {
      const errors = Object.entries(route.responses).filter(([status]) => Number(status) >= 400);
      expect(errors.length, `${route.method} ${route.path}`).toBeGreaterThan(0);
      // (/readyz's 503 is its readiness report, not a refusal.)
      for (const [status, spec] of errors) {
        if (route.path === '/readyz' && status === '503') continue;
        // The OAuth door answers RFC 6749 §5.2 errors, which carry the contract's detail and error_code too
        // (413 and 405 come from the server itself, before any route).
        const expected = route.path.startsWith('/oauth2/') && Number(status) !== 413 && Number(status) !== 405 ? OAuthErrorBody : ErrorBody;
        expect(spec.content?.['application/json'], `${route.method} ${route.path} ${status}`).toBe(expected);
      }
    }
  });

  it('every admin route (and only those) declares the admin bearer token', () => {
    for (const route of all) expect(route.auth === 'admin_bearer', `${route.method} ${route.path}`).toBe(route.path.startsWith('/admin/'));
  });
});
