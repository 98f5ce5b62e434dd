// The scale table: the same token request at 10, 100,000 and 1,000,000 agent rows, with requests whose
// agent view is in no cache. Rows go straight into Postgres (bulk.ts: INSERT ... SELECT generate_series,
// every bulk agent holding one argon2id hash of a known secret made with the pool's own parameters).
//
// Two figures per size, because "not in any cache" means two different things for a credential exchange:
//  - cold (argon2-bound): each request is an agent never requested before, sampled at random over the
//    whole table: secret hashes read from Postgres, one argon2id verification, the view read from Postgres,
//    a signature. Bound by argon2.
//  - warm secret, view from Postgres (cache-miss-bound): the agents of the cold run again (their secrets
//    are now in the verified-credentials cache, so no argon2), with the view caches switched off, so every
//    request reads its agent view from Postgres. For that the scenario's service runs on Postgres without
//    Redis and with LOCAL_CACHE_MAX_ENTRIES=0 (the in-process view cache off); its rate limiter is then
//    in-process. This is the cost of a cache miss, without argon2 hiding it.
// One run per size (no ratio is judged here; the table shows whether the figures move with the size).
import { hashSync } from '@node-rs/argon2';
import type { Scenario } from './types.js';
import type { BenchContext, ScenarioReport } from '../lib/context.js';
import { startBenchService } from '../lib/service.js';
import { BulkAgents } from '../lib/bulk.js';
import { argon2Tasks } from '../lib/metrics.js';
import { measure } from '../lib/load.js';
import { prewarm } from '../lib/http.js';
import { Workload, ColdPool, BULK_SECRET, post, TOKEN_PATH } from '../lib/workload.js';
import { loadArgon2Options } from '../limits/argon2-options.js';
import { argon2VerifyRate } from '../limits/argon2-rate.js';
import { table, fmt, type Measurement } from '../lib/report.js';

export const scale: Scenario = {
  name: 'scale',
  title: 'token at 10 / 100,000 / 1,000,000 agent rows, agent views in no cache (cold, and warm secret with the view from Postgres)',
  byDefault: true,
  run: (ctx) => ctx.scoped((defer) => runScale(ctx, defer)),
};

interface Point {
  rows: number;
  cold: (Measurement & { agents: number }) | null;
  coldNote: string;
  miss: Measurement | null;
}

async function runScale(ctx: BenchContext, defer: (fn: () => Promise<void> | void) => void): Promise<ScenarioReport> {
  const { opts } = ctx;
  if (opts.embedded) {
    return { name: 'scale', text: ['scale: skipped (--embedded: bulk rows need Postgres)'], checks: [], data: {} };
  }
  ctx.log('starting the service for the scale table (Postgres, no Redis, LOCAL_CACHE_MAX_ENTRIES=0: views read from Postgres) ...');
  const service = await startBenchService({ embedded: false, redis: false, uvThreads: opts.uvThreads, env: { LOCAL_CACHE_MAX_ENTRIES: '0' } });
  defer(() => service.dispose());
  const work = new Workload(ctx, service);
  await work.seed(1); // the template agent (with its grant) that bulk rows copy
  const { options } = await loadArgon2Options();
  const bulk = new BulkAgents(service.databaseUrl!, hashSync(BULK_SECRET, options));
  defer(() => bulk.end());
  const rate = Math.max((await argon2VerifyRate(opts.cores, 1)).verifyPerSecond, 50);
  const poolSize = Math.ceil(rate * (opts.scaleDuration + 1) * 2) + 2 * opts.connections;
  const tokenUrl = `${service.publicUrl}${TOKEN_PATH}`;
  const body = (id: string) => JSON.stringify({ api_key_id: id, secret: BULK_SECRET, platform_id: work.platformId });
  const used = new Set<string>();
  const points: Point[] = [];

  for (const size of opts.scaleSizes) {
    const before = await bulk.count();
    if (before < size) {
      const t0 = Date.now();
      await bulk.add(size - before, 'fill');
      await bulk.settle();
      ctx.log(`  inserted ${fmt(size - before)} agent rows in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    }
    const rows = await bulk.count();
    const ids = await bulk.sample('fill', Math.min(poolSize, rows), used);
    ids.forEach((id) => used.add(id));
    const bodies = ids.map(body);
    const point: Point = { rows, cold: null, coldNote: '', miss: null };

    // Cold: only when the table holds enough never-used agents to keep the load going for the duration.
    let verified: string[];
    if (bodies.length >= 2 * opts.connections + rate) {
      const pool = new ColdPool(bodies);
      let argonBefore: number | null = null;
      const result = await measure({
        url: service.publicUrl,
        connections: opts.connections,
        duration: opts.scaleDuration,
        warmup: 1,
        requests: pool.requests(),
        onStart: pool.onStart,
        beforeMeasure: async () => void (argonBefore = await argon2Tasks(service.adminUrl)),
      });
      const argonAfter = await argon2Tasks(service.adminUrl);
      // agents: tokens answered, each to a fresh agent (not bodies handed out: see compare.ts).
      point.cold = { name: 'cold', ...result, agents: result.ok2xx, argon2Verifications: argonBefore !== null && argonAfter !== null ? argonAfter - argonBefore : undefined };
      if (pool.exhausted) point.coldNote = 'pool ran out: not valid';
      verified = ids.slice(0, pool.used);
    } else {
      point.coldNote = `only ${bodies.length} unused agents: too few to load`;
      await prewarm(tokenUrl, bodies, 1);
      verified = ids;
    }

    // Warm secret, view from Postgres: the agents of the cold run, rotated. Requests cut off when a load
    // run stopped (end of warm-up or measurement) never finished their verification: one request each,
    // unmeasured, completes those first (the others answer from the verified-credentials cache).
    if (point.cold) await prewarm(tokenUrl, verified.map(body), 1);
    if (verified.length > 0) {
      let argonBefore: number | null = null;
      const result = await measure({
        url: service.publicUrl,
        connections: opts.connections,
        duration: opts.scaleDuration,
        warmup: 1,
        requests: post(TOKEN_PATH, verified.map(body)),
        beforeMeasure: async () => void (argonBefore = await argon2Tasks(service.adminUrl)),
      });
      const argonAfter = await argon2Tasks(service.adminUrl);
      point.miss = { name: 'miss', ...result, argon2Verifications: argonBefore !== null && argonAfter !== null ? argonAfter - argonBefore : undefined, note: `${verified.length} agents` };
    }
    points.push(point);
    ctx.log(`  ${fmt(rows)} rows: cold ${fmt(point.cold?.rps)} req/s (p99 ${fmt(point.cold?.p99, 1)} ms) ${point.coldNote}; ` +
      `view from Postgres ${fmt(point.miss?.rps)} req/s (p99 ${fmt(point.miss?.p99, 1)} ms, argon2 tasks ${point.miss?.argon2Verifications ?? '?'})`);
  }

  const rowsOut = points.map((p) => [
    fmt(p.rows),
    p.cold ? fmt(p.cold.rps) : '-',
    p.cold ? fmt(p.cold.p99, 1) : '-',
    p.cold ? `${fmt(p.cold.agents)} / ${p.cold.argon2Verifications ?? '?'}` : '-',
    p.miss ? fmt(p.miss.rps) : '-',
    p.miss ? fmt(p.miss.p99, 1) : '-',
    p.miss ? `${p.miss.argon2Verifications ?? '?'}` : '-',
    String((p.cold ? p.cold.non2xx + p.cold.errors : 0) + (p.miss ? p.miss.non2xx + p.miss.errors : 0)),
    p.coldNote,
  ]);
  return {
    name: 'scale',
    text: [
      'scale (one run per size; service on Postgres without Redis, in-process view cache off, so every request reads Postgres):',
      table(rowsOut, ['agent rows', 'cold req/s', 'cold p99 ms', 'fresh-agent tokens / argon2', 'view-from-PG req/s', 'p99 ms', 'argon2', 'non-2xx+err', 'note']),
    ],
    checks: [],
    data: { points, pool_size: poolSize },
  };
}
