// Koa adapter: `app.use(koaAgentAuth(verifier))` before the router; the claims are in `ctx.state.agent`.
// Koa has no router of its own and a router (@koa/router) routes on `ctx.path` after this runs, so the
// check uses the canonical path (as node:http does) and rewrites `ctx.url` to it when it differs: the
// router routes on exactly what was checked. Structural types: no koa import.
import type { Verifier } from '../verifier.js';

export interface KoaLikeContext {
  method: string;
  url: string;
  headers: { authorization?: string | string[] | undefined };
  status: number;
  body: unknown;
  set(headers: Record<string, string>): void;
  state: Record<string, unknown>;
}

export function koaAgentAuth(verifier: Verifier) {
  return async (ctx: KoaLikeContext, next: () => Promise<unknown>): Promise<void> => {
    const received = ctx.url;
    const result = await verifier.authorize({ method: ctx.method, target: { kind: 'path', path: received }, authorization: ctx.headers.authorization });
    if (!result.ok) {
      ctx.status = result.status;
      ctx.set({ ...result.headers, 'content-type': 'application/json', 'cache-control': 'no-store' });
      ctx.body = result.body;
      return;
    }
    ctx.state.agent = result.claims;
    if (result.canonicalTarget !== undefined && result.canonicalTarget !== received) ctx.url = result.canonicalTarget;
    await next();
  };
}
