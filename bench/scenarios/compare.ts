// The main comparison, in interleaved rounds on one machine: the service's token endpoint (warm and cold
// credentials), listing, JWKS and scope file, beside the ceilings of this machine (bare uWS signers, bare
// uWS serving the same JWKS bytes, raw argon2 with the pool's parameters) and the peer (node-oidc-provider).
// Ratios are taken round by round (each round's service figure over the same round's ceiling) and reported
// as the median with the min–max of the rounds.
import { hashSync } from '@node-rs/argon2';
import type { Scenario } from './types.js';
import type { BenchContext, ScenarioReport } from '../lib/context.js';
import { startBenchService } from '../lib/service.js';
import { RssSampler } from '../lib/rss.js';
import { BulkAgents } from '../lib/bulk.js';
import { argon2Counter, coldArm, coldPoolSize } from '../lib/cold.js';
import { Workload, ColdPool, BULK_SECRET, post, TOKEN_PATH, LISTING_PATH, JWKS_PATH } from '../lib/workload.js';
import { startBareJwks, startBareSigner, startPeer, type SideServer } from '../lib/sides.js';
import { interleave, loadArm, summaryRows, SUMMARY_HEADER, type Arm } from '../lib/rounds.js';
import { check, checkRows, CHECK_HEADER } from '../lib/checks.js';
import { pairedRatios } from '../lib/stats.js';
import { table, mib, fmt, type Measurement } from '../lib/report.js';
import { opensslRsa2048 } from '../limits/openssl.js';
import { argon2VerifyRate } from '../limits/argon2-rate.js';
import { loadArgon2Options } from '../limits/argon2-options.js';

export const compare: Scenario = {
  name: 'compare',
  title: 'token (warm, cold), listing, JWKS, scope file beside bare uWS signers, bare uWS JWKS, raw argon2 and the peer',
  byDefault: true,
  run: (ctx) => ctx.scoped((defer) => runCompare(ctx, defer)),
};

async function runCompare(ctx: BenchContext, defer: (fn: () => Promise<void> | void) => void): Promise<ScenarioReport> {
  const { opts } = ctx;
  ctx.log(`openssl speed -multi ${opts.cores} -seconds ${opts.opensslSeconds} rsa2048 (info) ...`);
  const openssl = await opensslRsa2048(opts.cores, opts.opensslSeconds);
  ctx.log(`  RSA-2048 sign/s ${fmt(openssl.signPerSecond)}`);

  ctx.log(`starting the service (${opts.embedded ? 'embedded PGlite' : 'Postgres + Redis'}, UV_THREADPOOL_SIZE ${opts.uvThreads}) ...`);
  const service = await startBenchService({ embedded: opts.embedded, uvThreads: opts.uvThreads, env: opts.workers ? { WORKERS: String(opts.workers) } : {} });
  defer(() => service.dispose());
  const http = service.httpProcesses;
  ctx.log(`  up: ${http} HTTP process(es) reported ready; ${service.publicUrl}`);
  const rss = new RssSampler(service.pid).start();
  defer(() => rss.stop());

  const work = new Workload(ctx, service);
  await work.seed(opts.warmAgents);

  // Cold pools, one per round, sized from a short raw argon2 measurement (never below 50/s).
  const sizing = await argon2VerifyRate(opts.cores, 1);
  const perRound = coldPoolSize(sizing.verifyPerSecond, opts);
  const coldBodies: string[][] = [];
  if (service.databaseUrl) {
    const { options } = await loadArgon2Options();
    const bulk = new BulkAgents(service.databaseUrl, hashSync(BULK_SECRET, options));
    defer(() => bulk.end());
    await bulk.add(perRound * opts.rounds, 'cold');
    const ids = await bulk.apiKeyIds('cold');
    for (let r = 0; r < opts.rounds; r++) {
      coldBodies.push(ids.slice(r * perRound, (r + 1) * perRound).map((id) => JSON.stringify({ api_key_id: id, secret: BULK_SECRET, platform_id: work.platformId })));
    }
    await bulk.settle();
    ctx.log(`  ${ids.length} cold agents as bulk rows (shared secret, own api_key_id each)`);
  } else {
    const n = Math.min(opts.maxColdAgents, perRound * opts.rounds);
    ctx.log(`  seeding ${n} cold agents through the admin API (embedded: no bulk SQL) ...`);
    const agents = await work.createAgents(n, 'cold');
    const each = Math.floor(n / opts.rounds);
    for (let r = 0; r < opts.rounds; r++) coldBodies.push(work.tokenBodies(agents.slice(r * each, (r + 1) * each)));
  }
  await work.prewarm(http);

  ctx.log('starting bare uWS JWKS, bare signers and the peer ...');
  const jwksBytes = await (await fetch(`${service.publicUrl}${JWKS_PATH}`)).text();
  const sides: Record<string, SideServer> = {};
  const side = async (name: string, start: () => Promise<SideServer>) => {
    sides[name] = await start();
    defer(() => sides[name].stop());
  };
  await side('bare JWKS', () => startBareJwks(jwksBytes, http, opts.uvThreads));
  await side('bare signer', () => startBareSigner(http, 'async', opts.uvThreads));
  await side('bare signer/core', () => startBareSigner(opts.cores, 'sync', opts.uvThreads));
  if (opts.peer) await side('peer', () => startPeer(http, opts.uvThreads));

  // Per round: the service's peak RSS and its non-2xx + errors, over its arms.
  const rssRound: number[] = [];
  const failures: number[] = [];
  const serviceHooks = (extra: Parameters<typeof loadArm>[4] = {}) => ({
    ...extra,
    before: async (round: number) => {
      rss.mark();
      await extra.before?.(round);
    },
    after: async (m: Measurement, round: number) => {
      rss.sample();
      rssRound[round] = Math.max(rssRound[round] ?? 0, mib(rss.windowPeak));
      failures[round] = (failures[round] ?? 0) + m.non2xx + m.errors;
      await extra.after?.(m, round);
    },
  });

  // argon2 tasks during the measured part (from /metrics): ~0 for warm, ~1 per request for cold.
  const countArgon2 = argon2Counter(service.adminUrl);

  const svc = () => service.publicUrl;
  const warmTokens = post(TOKEN_PATH, work.tokenBodies());
  const cold: ColdPool[] = coldBodies.map((b) => new ColdPool(b));
  const arms: Arm<Measurement>[] = [
    loadArm(ctx, 'token (warm)', svc, () => warmTokens, serviceHooks(countArgon2)),
    loadArm(ctx, 'bare signer (same processes)', () => sides['bare signer'].url, () => sides['bare signer'].requests, { note: sides['bare signer'].note }),
    loadArm(ctx, 'bare signer (one per core)', () => sides['bare signer/core'].url, () => sides['bare signer/core'].requests, { note: sides['bare signer/core'].note }),
    ...(sides.peer ? [loadArm(ctx, 'peer: oidc-provider token', () => sides.peer.url, () => sides.peer.requests, { note: sides.peer.note })] : []),
    loadArm(ctx, 'JWKS', svc, () => [{ method: 'GET', path: JWKS_PATH }], serviceHooks()),
    loadArm(ctx, 'bare uWS JWKS', () => sides['bare JWKS'].url, () => sides['bare JWKS'].requests, { note: sides['bare JWKS'].note }),
    coldArm(ctx, 'token (cold)', svc, cold, serviceHooks, countArgon2),
    argon2Arm(ctx),
    loadArm(ctx, 'platform listing', svc, () => post(LISTING_PATH, work.listingBodies()), serviceHooks()),
    loadArm(ctx, 'scope file', svc, () => [{ method: 'GET', path: work.scopesPath }], serviceHooks()),
  ];
  ctx.log(`${opts.rounds} interleaved round(s) of ${arms.length} measurements, ${opts.duration}s each after ${opts.warmup}s warm-up ...`);
  const results = await interleave(ctx, opts.rounds, arms);
  rss.stop();

  const rps = (name: string) => (results[name] ?? []).map((m) => (m && !m.invalid ? m.rps : undefined));
  const checks = [
    check('token warm / bare signer, same process count', pairedRatios(rps('token (warm)'), rps('bare signer (same processes)')), { op: '>=', value: 0.85 }),
    check('token warm / bare signer, one process per core', pairedRatios(rps('token (warm)'), rps('bare signer (one per core)')), null, 'info: the other bare layout'),
    check('token warm / peer', pairedRatios(rps('token (warm)'), rps('peer: oidc-provider token')), { op: '>=', value: 1.5 }),
    check(`token warm p99 ms @${opts.connections} connections`, results['token (warm)'].map((m) => m.p99), { op: '<=', value: 40 }, ceilingP99(results)),
    check('token cold / raw argon2 (pool parameters)', pairedRatios(rps('token (cold)'), rps('raw argon2 verify')), { op: '>=', value: 0.8 }),
    check('JWKS / bare uWS JWKS', pairedRatios(rps('JWKS'), rps('bare uWS JWKS')), { op: '>=', value: 0.9 }),
    // The memory target is for Postgres + Redis; embedded, PGlite lives inside the service (~0.8 GB).
    check('service peak RSS MiB (sum of processes)', rssRound, opts.embedded ? null : { op: '<=', value: 256 }, opts.embedded ? 'embedded: PGlite inside' : undefined),
    check('service non-2xx + errors', failures, { op: '=', value: 0 }),
    check('openssl RSA-2048 sign/s, all cores', [openssl.signPerSecond], null, 'info'),
  ];
  const settings = `service: ${opts.embedded ? 'embedded PGlite' : 'Postgres + Redis'}, ${http} HTTP process(es) (from its log), UV_THREADPOOL_SIZE ${opts.uvThreads} for ` +
    `service, peer and bare servers; ${opts.rounds} round(s), ${opts.connections} connections, ${opts.duration}s after ${opts.warmup}s warm-up; peak RSS ${fmt(mib(rss.peak))} MiB (sum of VmHWM ${fmt(mib(rss.hwm))} MiB)`;
  return {
    name: 'compare',
    text: [settings, table(summaryRows(results), SUMMARY_HEADER), table(checkRows(checks), CHECK_HEADER)],
    checks,
    data: { http_processes: http, uv_threads: opts.uvThreads, openssl, results, rss_peak_mib: mib(rss.peak), rss_hwm_mib: mib(rss.hwm) },
  };
}

/**
 * The bare signer's own p99 at the same connection count: at saturation, latency is mostly queueing
 * (connections / throughput), so on a machine whose RSA rate is low the ceiling itself may miss 40 ms.
 */
function ceilingP99(results: Record<string, Measurement[]>): string {
  const p99s = (results['bare signer (same processes)'] ?? []).filter((m) => m && !m.invalid).map((m) => m.p99).sort((a, b) => a - b);
  return p99s.length ? `bare signer p99 ${fmt(p99s[Math.floor(p99s.length / 2)], 0)} ms (median)` : '';
}

/** Raw argon2id verifications per second on every core with the pool's parameters, as a round's arm. */
function argon2Arm(ctx: BenchContext): Arm<Measurement> {
  return {
    name: 'raw argon2 verify',
    run: async (round) => {
      const rate = await argon2VerifyRate(ctx.opts.cores, ctx.opts.argon2Seconds);
      ctx.log(`  round ${round + 1} raw argon2 verify: ${fmt(rate.verifyPerSecond, 1)}/s on ${rate.threads} threads`);
      return {
        name: 'raw argon2 verify',
        rps: rate.verifyPerSecond,
        requests: 0,
        ok2xx: 0,
        non2xx: 0,
        errors: 0,
        p50: NaN,
        p99: NaN,
        meanMs: NaN,
        seconds: ctx.opts.argon2Seconds,
        statusCodes: {},
        note: `${rate.threads} threads, ${JSON.stringify(rate.options)}`,
      };
    },
  };
}
