// What a flood of revocation-feed polls costs token issuance, beside a JWKS flood of
// the same size. In interleaved rounds, warm token issuance is measured while 64 connections flood
//   (a) GET /.well-known/jwks.json (a cached static document: the reference),
//   (b) POST the RFC 8936 poll with a valid feed token, as an up-to-date receiver sends it (ack = its last SET),
//   (c) POST the poll with wrong feed tokens, and with well-formed tokens for unknown platform ids,
//   (d) POST the poll with another valid feed token, varying ack and maxEvents in every request (a holder of
//       a credential defeating the answer cache: its budget's worth of joined answers, 429 beyond),
//   (e) nothing (the ceiling of this machine),
// with ~160 live revocation entries on the platform. The figure is the ratio of token issuance under (b),
// (c) and (d) over (a), round by round: the targets are >= 0.9 for (b) and >= 0.8 for (c) and (d). Each
// flood also runs alone for a few seconds first, and the service's CPU time per flood request (from /proc)
// is reported: what an answer costs the service, apart from the load generator sharing the cores. The
// service's resident memory is sampled throughout. Its growth over the floods (the peak of the rounds over
// the RSS after a warm-up of the reference arm, the token load beside a JWKS flood) must stay within 64 MiB:
// what the floods add, not the token load's own warm-up growth, which is printed beside it as the growth
// since the cold start.
// The flood runs in a thread of its own (autocannon `workers`): sharing the event loop of the measured token
// load, a flood whose requests cost the client more would slow the token client, not the service.
import { randomBytes, randomUUID } from 'node:crypto';
import type { Scenario } from './types.js';
import type { BenchContext, ScenarioReport } from '../lib/context.js';
import { startBenchService } from '../lib/service.js';
import { Workload, post, TOKEN_PATH, JWKS_PATH, JSON_HEADERS } from '../lib/workload.js';
import { interleave, type Arm } from '../lib/rounds.js';
import { load, measure, type LoadResult, type RequestSpec } from '../lib/load.js';
import { check, checkRows, CHECK_HEADER } from '../lib/checks.js';
import { formatSpread, pairedRatios, spread } from '../lib/stats.js';
import { processTree } from '../../kit/proc.js';
import { cpuSeconds } from '../lib/cpu.js';
import { RssSampler } from '../lib/rss.js';
import { table, fmt } from '../lib/report.js';

const FLOOD_CONNECTIONS = 64;
const LIVE_ENTRIES = 160;
/** Connections of the measured token load (the flood is the other 64). */
const TOKEN_CONNECTIONS = 16;
/** Seconds each flood runs alone, for the service's CPU per request. */
const ALONE_SECONDS = 3;
/** Most the service's resident memory may grow over the floods. */
const RSS_GROWTH_LIMIT = 64 * 1024 * 1024;
const MIB = 1024 * 1024;

export const feedflood: Scenario = {
  name: 'feedflood',
  title: 'token issuance while 64 connections flood the revocation poll (valid / bad tokens / varied valid requests) vs the JWKS (ratio targets 0.9 / 0.8 / 0.8), service RSS growth <= 64 MiB',
  byDefault: false,
  run: (ctx) => ctx.scoped((defer) => runFeedFlood(ctx, defer)),
};

interface Round {
  token: LoadResult;
  flood?: LoadResult;
  /** Service CPU µs per flood request, the flood alone. */
  cpuPerRequestUs?: number;
  /** Peak summed VmRSS of the service during the arm (bytes). */
  rssPeak: number;
}

async function runFeedFlood(ctx: BenchContext, defer: (fn: () => Promise<void> | void) => void): Promise<ScenarioReport> {
  const { opts } = ctx;
  ctx.log(`starting the service (${opts.embedded ? 'embedded PGlite' : 'Postgres + Redis'}) ...`);
  const service = await startBenchService({ embedded: opts.embedded, uvThreads: opts.uvThreads, env: opts.workers ? { WORKERS: String(opts.workers) } : {} });
  defer(() => service.dispose());
  ctx.log(`  up: ${service.httpProcesses} HTTP process(es); ${service.publicUrl}`);
  const work = new Workload(ctx, service);
  await work.seed(opts.warmAgents);
  const platformId = work.platformId;

  // ~160 live entries: an agent of the platform deactivated and reactivated (each deactivation is one entry).
  const churn = await work.createAgents(1, 'churn');
  for (let i = 0; i < LIVE_ENTRIES; i++) {
    await work.admin.call('PATCH', `/admin/v1/agents/${churn[0].agent_id}`, { status: 'inactive' });
    await work.admin.call('PATCH', `/admin/v1/agents/${churn[0].agent_id}`, { status: 'active' });
  }
  const { feed_token: feedToken } = await work.admin.call<{ feed_token: string }>('POST', `/admin/v1/platforms/${platformId}/feed-credentials`);
  const pollPath = `/api/v1/platforms/${platformId}/revocations`;
  // The receiver's state: every SET applied, so it acknowledges the last one (what the middleware sends).
  const first = await fetch(`${service.publicUrl}${pollPath}`, {
    method: 'POST',
    headers: { ...JSON_HEADERS, authorization: `Bearer ${feedToken}` },
    body: JSON.stringify({ maxEvents: 1000, returnImmediately: true }),
  });
  const sets = ((await first.json()) as { sets: Record<string, string> }).sets;
  const seqs = Object.keys(sets).map((jti) => Number(jti.split(':')[1])).filter(Number.isFinite);
  const live = seqs.length;
  const last = Math.max(...seqs);
  ctx.log(`  ${live} live revocation SETs on the platform (head ${last}); feed token created`);
  const pollBody = JSON.stringify({ ack: [`${platformId}:${last}`], maxEvents: 1000, returnImmediately: true });
  const validPoll: RequestSpec[] = [{ method: 'POST', path: pollPath, headers: { ...JSON_HEADERS, authorization: `Bearer ${feedToken}` }, body: pollBody }];
  // Wrong tokens for the real platform, and well-formed tokens for unknown platforms, mixed.
  const badPolls: RequestSpec[] = Array.from({ length: 256 }, (_, i) => {
    const target = i % 2 === 0 ? pollPath : `/api/v1/platforms/${randomUUID()}/revocations`;
    return { method: 'POST', path: target, headers: { ...JSON_HEADERS, authorization: `Bearer acef_${randomBytes(32).toString('base64url')}` }, body: pollBody };
  });
  // Another credential (each has its own poll budget), every request another (ack, maxEvents).
  const { feed_token: variedToken } = await work.admin.call<{ feed_token: string }>('POST', `/admin/v1/platforms/${platformId}/feed-credentials`);
  const variedPolls: RequestSpec[] = Array.from({ length: 512 }, (_, i) => ({
    method: 'POST',
    path: pollPath,
    headers: { ...JSON_HEADERS, authorization: `Bearer ${variedToken}` },
    body: JSON.stringify({ ack: [`${platformId}:${(i * 7919) % (last + 1)}`], maxEvents: (i * 104_729) % 1001, returnImmediately: true }),
  }));
  const jwks: RequestSpec[] = [{ method: 'GET', path: JWKS_PATH }];
  await work.prewarm(service.httpProcesses);
  const tokenRequests = post(TOKEN_PATH, work.tokenBodies());
  const rss = new RssSampler(service.pid).start();
  defer(() => rss.stop());
  const rssCold = rss.current;

  const arm = (name: string, flood: RequestSpec[] | undefined): Arm<Round> => ({
    name,
    run: async (round) => {
      rss.mark();
      let cpuPerRequestUs: number | undefined;
      if (flood) {
        const serviceCpu = () => processTree(service.pid).reduce((sum, pid) => sum + cpuSeconds(pid), 0);
        const before = serviceCpu();
        const alone = await load({ url: service.publicUrl, connections: FLOOD_CONNECTIONS, duration: ALONE_SECONDS, requests: flood, workers: 1 });
        cpuPerRequestUs = ((serviceCpu() - before) / Math.max(1, alone.requests)) * 1e6;
      }
      const floodRun = flood
        ? load({ url: service.publicUrl, connections: FLOOD_CONNECTIONS, duration: opts.warmup + opts.duration + 1, requests: flood, workers: 1 })
        : undefined;
      const token = await measure({ url: service.publicUrl, connections: TOKEN_CONNECTIONS, duration: opts.duration, warmup: opts.warmup, requests: tokenRequests });
      const floodResult = await floodRun;
      ctx.log(
        `  ${round < 0 ? 'warm-up' : `round ${round + 1}`} ${name}: token ${fmt(token.rps)}/s (non-2xx ${token.non2xx})` +
          (floodResult ? `; flood ${fmt(floodResult.rps)} req/s, statuses ${JSON.stringify(floodResult.statusCodes)}; alone ${cpuPerRequestUs!.toFixed(1)} µs service CPU per request` : ''),
      );
      return { token, flood: floodResult, cpuPerRequestUs, rssPeak: rss.windowPeak };
    },
  });
  // The reference arm once before the rounds, its figures discarded: the baseline is the service warmed by
  // the token load and a flood that costs nothing to keep.
  const reference = arm('JWKS flood', jwks);
  ctx.log('  warm-up (discarded): the token load beside a JWKS flood');
  await reference.run(-1);
  const rssWarm = rss.current;
  const results = await interleave(ctx, opts.rounds, [
    reference,
    arm('feed poll flood, valid token', validPoll),
    arm('feed poll flood, bad tokens / unknown platforms', badPolls),
    arm('feed poll flood, valid token, varied ack / maxEvents', variedPolls),
    arm('no flood', undefined),
  ]);
  rss.stop();
  const rssPeak = Math.max(...Object.values(results).flatMap((rounds) => rounds.map((r) => r.rssPeak)));
  const growthSinceCold = rssPeak - rssCold;
  const growthOverFloods = rssPeak - rssWarm;
  ctx.log(
    `  service RSS: ${fmt(rssCold / MIB)} MiB cold (seeded, before any load), ${fmt(rssWarm / MIB)} MiB after the warm-up, ` +
      `peak of the rounds ${fmt(rssPeak / MIB)} MiB: growth over the floods ${fmt(growthOverFloods / MIB)} MiB, since the cold start ${fmt(growthSinceCold / MIB)} MiB`,
  );

  const tokenRps = (name: string) => results[name].map((r) => r.token.rps);
  const floodRps = (name: string) => results[name].map((r) => r.flood?.rps ?? NaN);
  const cpuUs = (name: string) => results[name].map((r) => r.cpuPerRequestUs ?? NaN);
  const validCpu = pairedRatios(cpuUs('feed poll flood, valid token'), cpuUs('JWKS flood'));
  const badCpu = pairedRatios(cpuUs('feed poll flood, bad tokens / unknown platforms'), cpuUs('JWKS flood'));
  const variedName = 'feed poll flood, valid token, varied ack / maxEvents';
  const variedCpu = pairedRatios(cpuUs(variedName), cpuUs('JWKS flood'));
  const validRatio = pairedRatios(tokenRps('feed poll flood, valid token'), tokenRps('JWKS flood'));
  const badRatio = pairedRatios(tokenRps('feed poll flood, bad tokens / unknown platforms'), tokenRps('JWKS flood'));
  const variedRatio = pairedRatios(tokenRps(variedName), tokenRps('JWKS flood'));
  const ratios: Record<string, { cpu: number[]; token: number[] }> = {
    'feed poll flood, valid token': { cpu: validCpu, token: validRatio },
    'feed poll flood, bad tokens / unknown platforms': { cpu: badCpu, token: badRatio },
    [variedName]: { cpu: variedCpu, token: variedRatio },
  };
  const rows = Object.keys(results).map((name) => [
    name,
    formatSpread(spread(tokenRps(name))),
    formatSpread(spread(floodRps(name))),
    name === 'no flood' ? '' : formatSpread(spread(cpuUs(name)), 1),
    ratios[name] ? formatSpread(spread(ratios[name].cpu), 2) : '',
    String(results[name].reduce((s, r) => s + r.token.non2xx, 0)),
    ratios[name] ? formatSpread(spread(ratios[name].token), 2) : '',
    formatSpread(spread(results[name].map((r) => r.rssPeak / MIB)), 0),
  ]);
  const checks = [
    check('token issuance under a valid-token feed flood / under a JWKS flood', validRatio, { op: '>=', value: 0.9 }),
    check('token issuance under a bad-token feed flood / under a JWKS flood', badRatio, { op: '>=', value: 0.8 }),
    check('token issuance under a varied valid-token feed flood / under a JWKS flood', variedRatio, { op: '>=', value: 0.8 }),
    check('service RSS growth over the floods (MiB), from after the warm-up', [growthOverFloods / MIB], { op: '<=', value: RSS_GROWTH_LIMIT / MIB }),
    check('service RSS growth since the cold start (MiB), the warm-up included', [growthSinceCold / MIB], null),
  ];
  const text = [
    `Feed flood vs JWKS flood (${FLOOD_CONNECTIONS} flood connections, ${TOKEN_CONNECTIONS} token connections, ${live} live SETs, ${opts.rounds} rounds of ${opts.duration} s; medians (min–max))\n` +
      table(rows, ['flood', 'token/s', 'flood req/s', 'service µs/request (alone)', 'µs ratio to JWKS', 'token non-2xx', 'token ratio to JWKS flood', 'service RSS peak MiB']),
    table(checkRows(checks), CHECK_HEADER),
  ];
  return { name: 'feedflood', text, checks, data: { live, results, validRatio, badRatio, variedRatio, validCpu, badCpu, variedCpu, rssCold, rssWarm, rssPeak } };
}
