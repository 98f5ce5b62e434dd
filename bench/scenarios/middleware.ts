// The platform half: what a protected request costs a platform. One node:http process (bench/peer/
// middleware-server.ts) answers the same warm token through four handlers: plain (no check), the
// middleware's protectNodeHandler, a bare jose jwtVerify per request, and express-jwt + jwks-rsa (the peer).
// Interleaved rounds, autocannon in this process (it shares the cores with the server, as everywhere).
// Targets: protected >= 0.8x plain and >= 1.5x bare jose, round by round.
import type { Scenario } from './types.js';
import type { BenchContext, ScenarioReport } from '../lib/context.js';
import { spawnReady } from '../lib/children.js';
import { interleave, loadArm, summaryRows, SUMMARY_HEADER } from '../lib/rounds.js';
import { check, checkRows, CHECK_HEADER } from '../lib/checks.js';
import { pairedRatios } from '../lib/stats.js';
import { table, type Measurement } from '../lib/report.js';

export const middleware: Scenario = {
  name: 'middleware',
  title: 'platform middleware: protectNodeHandler beside a plain handler, a bare jose jwtVerify handler and express-jwt + jwks-rsa, one node:http process, the same warm token',
  byDefault: true,
  run: (ctx) => ctx.scoped((defer) => runMiddleware(ctx, defer)),
};

const ARMS = [
  ['plain handler', '/plain/orders/1'],
  ['protectNodeHandler', '/protected/orders/1'],
  ['bare jose jwtVerify', '/jose/orders/1'],
  ['express-jwt + jwks-rsa (peer)', '/peer/orders/1'],
] as const;

async function runMiddleware(ctx: BenchContext, defer: (fn: () => Promise<void> | void) => void): Promise<ScenarioReport> {
  const { opts } = ctx;
  const server = await spawnReady(new URL('../peer/middleware-server.js', import.meta.url), { PORT: '0', UV_THREADPOOL_SIZE: String(opts.uvThreads) });
  defer(() => server.stop());
  const [, port, token] = server.readyLine.split(' ');
  const url = `http://127.0.0.1:${port}`;
  const headers = { authorization: `Bearer ${token}` };
  // Each checking handler must refuse a forged token and accept the warm one, or its figure means nothing.
  const forged = `${token.slice(0, -4)}AAAA`;
  for (const [name, path] of ARMS.slice(1)) {
    const refused = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${forged}` } });
    const accepted = await fetch(`${url}${path}`, { headers });
    await Promise.all([refused.arrayBuffer(), accepted.arrayBuffer()]);
    if (refused.status !== 401 || accepted.status !== 200) throw new Error(`middleware: ${name} answered ${refused.status} to a forged token and ${accepted.status} to the warm one`);
  }
  const arms = ARMS.map(([name, path]) => loadArm(ctx, name, () => url, () => [{ method: 'GET', path, headers }]));
  ctx.log(`middleware: ${opts.rounds} interleaved round(s), ${opts.connections} connections, one node:http process ...`);
  const results = await interleave(ctx, opts.rounds, arms);

  // A round with a refusal or an error is no figure of a protected request.
  const rps = (name: string) => (results[name] ?? []).map((m: Measurement) => (m && m.non2xx === 0 && m.errors === 0 ? m.rps : undefined));
  const checks = [
    check('protectNodeHandler / plain handler (req/s)', pairedRatios(rps('protectNodeHandler'), rps('plain handler')), { op: '>=', value: 0.8 }),
    check('protectNodeHandler / bare jose jwtVerify (req/s)', pairedRatios(rps('protectNodeHandler'), rps('bare jose jwtVerify')), { op: '>=', value: 1.5 }),
    check('protectNodeHandler / express-jwt + jwks-rsa (req/s)', pairedRatios(rps('protectNodeHandler'), rps('express-jwt + jwks-rsa (peer)')), null, 'info: the peer'),
    check('bare jose jwtVerify / plain handler (req/s)', pairedRatios(rps('bare jose jwtVerify'), rps('plain handler')), null, 'info'),
  ];
  return {
    name: 'middleware',
    text: [
      `platform middleware (${opts.rounds} round(s), ${opts.connections} connections, one node:http process, one warm token; revocation feed off):`,
      table(summaryRows(results), SUMMARY_HEADER),
      table(checkRows(checks), CHECK_HEADER),
    ],
    checks,
    data: { results },
  };
}
