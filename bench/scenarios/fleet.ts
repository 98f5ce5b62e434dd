// Fleet restart: N agents with cold credentials start at once through the real agent client
// (@agent-credential-exchange/client: list the platforms, then fetch a token), against a service with its default settings
// (rate limits included). Reports the time until every agent holds a token (p50/p99/max from the start),
// what the agents saw (429/503, with Retry-After, and whether the next attempt waited at least that long),
// and the total against 1.3 × N / (raw argon2 rate): each agent costs the service one argon2 verification
// (the listing; the token that follows is warm in the verified-credentials cache).
// Agents are bulk rows sharing one known secret (bulk.ts), so seeding costs no argon2 on the service.
// The raw argon2 rate is sampled before and after the fleet (the machine's speed drifts: the budget takes
// their mean, both printed), and argon2's share is printed: the service's argon2 CPU (its verifications ×
// the CPU one raw verification costs) against the service's whole CPU and against the cores' time.
import { setMaxListeners } from 'node:events';
import { hashSync } from '@node-rs/argon2';
import type { Scenario } from './types.js';
import type { BenchContext, ScenarioReport } from '../lib/context.js';
import { startBenchService } from '../lib/service.js';
import { BulkAgents } from '../lib/bulk.js';
import { Workload, BULK_SECRET } from '../lib/workload.js';
import { loadArgon2Options } from '../limits/argon2-options.js';
import { argon2VerifyRate } from '../limits/argon2-rate.js';
import { check, checkRows, CHECK_HEADER } from '../lib/checks.js';
import { table, fmt } from '../lib/report.js';
import { spread } from '../lib/stats.js';
import { AgentClient, DEFAULT_MAX_WAIT_MS } from '@agent-credential-exchange/client';
import { RssSampler } from '../lib/rss.js';
import { mib } from '../lib/report.js';
import { argon2Tasks } from '../lib/metrics.js';
import { cpuSeconds } from '../lib/cpu.js';

export const fleet: Scenario = {
  name: 'fleet',
  title: 'fleet restart: N agents with cold credentials start at once through the agent client',
  byDefault: true,
  run: (ctx) => ctx.scoped((defer) => runFleet(ctx, defer)),
};

/** What one agent's fetches saw. */
class Observed {
  statuses = new Map<number, number>();
  withRetryAfter = 0;
  honoured = 0;
  /** Retry-After answers followed by another attempt (the rest ended the agent's start: success elsewhere or failure). */
  followed = 0;
  networkErrors = 0;
  /** Causes of the network errors (ECONNRESET, timeouts, ...). */
  errorCodes = new Map<string, number>();
}

/** The n-th agent's own address (10.0.0.0/8), as a proxy in front of the service would report it. */
function agentAddress(n: number): string {
  return `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
}

/**
 * A fetch that counts statuses and checks that each retry waits at least the Retry-After it was given.
 * Every request carries the agent's own address in X-Forwarded-For: a fleet restarts from thousands of
 * machines, not one, so the per-address limits (the argon2 share, the failure limit) apply per agent as
 * they would behind the Ingress, not to the whole fleet as one caller.
 */
function observingFetch(seen: Observed, address: string): typeof fetch {
  let waitUntil = 0;
  return async (input, init) => {
    const now = performance.now();
    if (waitUntil > 0) {
      seen.followed++;
      if (now >= waitUntil - 5) seen.honoured++; // 5 ms for timer granularity
      waitUntil = 0;
    }
    let response: Response;
    try {
      const headers = new Headers(init?.headers);
      headers.set('x-forwarded-for', address);
      response = await fetch(input, { ...init, headers });
    } catch (error) {
      seen.networkErrors++;
      const cause = (error as { cause?: { code?: string; name?: string } }).cause;
      const code = cause?.code ?? cause?.name ?? (error as Error).name;
      seen.errorCodes.set(code, (seen.errorCodes.get(code) ?? 0) + 1);
      throw error;
    }
    seen.statuses.set(response.status, (seen.statuses.get(response.status) ?? 0) + 1);
    const retryAfter = response.headers.get('retry-after');
    if ((response.status === 429 || response.status === 503) && retryAfter !== null && /^\d+$/.test(retryAfter.trim())) {
      seen.withRetryAfter++;
      waitUntil = performance.now() + Number(retryAfter) * 1000;
    }
    return response;
  };
}

async function runFleet(ctx: BenchContext, defer: (fn: () => Promise<void> | void) => void): Promise<ScenarioReport> {
  const { opts } = ctx;
  const n = opts.fleetAgents;
  if (opts.embedded) return { name: 'fleet', text: ['fleet: skipped (--embedded: bulk rows need Postgres)'], checks: [], data: {} };

  ctx.log(`fleet: raw argon2 rate before the fleet (${opts.argon2Seconds}s) ...`);
  const before = await argon2VerifyRate(opts.cores, opts.argon2Seconds);
  ctx.log(`  ${fmt(before.verifyPerSecond, 1)} verify/s`);
  ctx.log('fleet: starting the service with its default settings (Postgres + Redis, default rate limits) ...');
  const service = await startBenchService({
    embedded: false,
    uvThreads: opts.uvThreads,
    // The defaults (ARGON2_MAX_QUEUE 64, ARGON2_MAX_PER_ADDRESS 4 = 64 / 16), not the bench's lifted
    // limits; one trusted proxy hop carries each agent's address.
    env: { RATE_LIMIT_TOKEN_POINTS: '120', RATE_LIMIT_AUTH_FAIL_POINTS: '20', ARGON2_MAX_QUEUE: '64', ARGON2_MAX_PER_ADDRESS: '4', TRUST_PROXY_HOPS: '1' },
  });
  defer(() => service.dispose());
  const work = new Workload(ctx, service);
  await work.seed(1);
  const { options } = await loadArgon2Options();
  const bulk = new BulkAgents(service.databaseUrl!, hashSync(BULK_SECRET, options));
  defer(() => bulk.end());
  await bulk.add(n, 'fleet');
  const ids = await bulk.apiKeyIds('fleet');
  await bulk.settle();
  const rss = new RssSampler(service.pid).start();
  defer(() => rss.stop());

  // The give-up bound from the first sample; the verdict uses the mean of both samples.
  const giveUpMs = Math.max(60_000, ((1.3 * n) / before.verifyPerSecond) * 5_000);
  const tasksBefore = await argon2Tasks(service.adminUrl);
  const cpuBefore = cpuSeconds(service.pid);
  const clientSettings = opts.fleetRetries === undefined ? `client defaults: maxWaitMs ${DEFAULT_MAX_WAIT_MS}` : `client maxRetries ${opts.fleetRetries}`;
  ctx.log(`fleet: ${n} agents start at once (${clientSettings}); target ≤ ${((1.3 * n) / before.verifyPerSecond).toFixed(1)}s (from the first argon2 sample); giving up after ${(giveUpMs / 1000).toFixed(0)}s ...`);
  const started = performance.now();
  const doneAt: number[] = [];
  const failures = new Map<string, number>();
  const observed: Observed[] = [];
  const controller = new AbortController();
  setMaxListeners(0, controller.signal); // one listener per agent
  const giveUp = setTimeout(() => controller.abort(), giveUpMs);
  let finished = 0;
  const progress = setInterval(() => ctx.log(`  ${finished}/${n} agents hold a token`), 10_000);
  const gaveUp = new Promise<never>((_, reject) =>
    controller.signal.addEventListener('abort', () => reject(new Error(`gave up after ${(giveUpMs / 1000).toFixed(0)} s`)), { once: true }),
  );
  gaveUp.catch(() => {});
  await Promise.all(
    ids.map(async (apiKeyId, index) => {
      const seen = new Observed();
      observed.push(seen);
      try {
        // One agent's start: list its platforms (cold: argon2), then a token for the first one.
        const startAgent = async () => {
          const client = await AgentClient.start({
            serviceUrl: service.publicUrl,
            apiKeyId,
            secret: BULK_SECRET,
            fetch: observingFetch(seen, agentAddress(index + 1)),
            // The client's defaults unless --fleet-retries asks otherwise: a fleet restart must not need tuning.
            ...(opts.fleetRetries === undefined ? {} : { maxRetries: opts.fleetRetries }),
            serviceTimeoutMs: 30_000,
          });
          const platformId = client.platforms()[0]?.platform_id;
          if (!platformId) throw new Error('no platform listed');
          await client.token(platformId);
        };
        await Promise.race([startAgent(), gaveUp]);
        doneAt.push((performance.now() - started) / 1000);
      } catch (error) {
        const key = (error as Error).message.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, '<id>').slice(0, 120);
        failures.set(key, (failures.get(key) ?? 0) + 1);
      } finally {
        finished++;
      }
    }),
  );
  clearTimeout(giveUp);
  clearInterval(progress);
  rss.stop();
  const total = doneAt.length > 0 ? Math.max(...doneAt) : NaN;
  const elapsedSeconds = (performance.now() - started) / 1000;
  const serviceCpu = cpuSeconds(service.pid) - cpuBefore;
  const tasksAfter = await argon2Tasks(service.adminUrl);
  const verifications = tasksBefore !== null && tasksAfter !== null ? tasksAfter - tasksBefore : NaN;
  ctx.log(`fleet: raw argon2 rate after the fleet (${opts.argon2Seconds}s) ...`);
  const after = await argon2VerifyRate(opts.cores, opts.argon2Seconds);
  ctx.log(`  ${fmt(after.verifyPerSecond, 1)} verify/s`);
  const rate = { verifyPerSecond: (before.verifyPerSecond + after.verifyPerSecond) / 2 };
  const budgetSeconds = (1.3 * n) / rate.verifyPerSecond;
  // One raw verification keeps one thread busy for 1 / (rate per thread) seconds.
  const argon2Cpu = verifications * (opts.cores / rate.verifyPerSecond);
  const share = {
    ofService: argon2Cpu / serviceCpu,
    ofCores: argon2Cpu / (elapsedSeconds * opts.cores),
    outsideArgon2MsPerAgent: ((serviceCpu - argon2Cpu) * 1000) / Math.max(1, doneAt.length),
  };

  const sum = (f: (o: Observed) => number) => observed.reduce((s, o) => s + f(o), 0);
  const statuses = new Map<number, number>();
  for (const o of observed) for (const [s, c] of o.statuses) statuses.set(s, (statuses.get(s) ?? 0) + c);
  const attempts = observed.map((o) => [...o.statuses.values()].reduce((a, b) => a + b, 0) + o.networkErrors);
  const networkCodes = new Map<string, number>();
  for (const o of observed) for (const [c, k] of o.errorCodes) networkCodes.set(c, (networkCodes.get(c) ?? 0) + k);
  const sorted = [...doneAt].sort((a, b) => a - b);
  const pct = (p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : NaN);
  // Agents refused more than 3 times: the client's old default (maxRetries 3) failed them; the wait budget does not.
  const beyondDefault = observed.filter((o) => o.withRetryAfter > 3).length;

  const checks = [
    check('agents holding a token', [doneAt.length], { op: '=', value: n }),
    check('fleet total seconds (last agent)', [total], { op: '<=', value: Number(budgetSeconds.toFixed(1)) }, `1.3 × ${n} / ${fmt(rate.verifyPerSecond, 1)} argon2/s`),
    check('Retry-After honoured by the next attempt (%)', [sum((o) => o.followed) ? (100 * sum((o) => o.honoured)) / sum((o) => o.followed) : 100], { op: '=', value: 100 }),
  ];
  const rows = [
    ['agents', fmt(n)],
    ['holding a token / failed', `${fmt(doneAt.length)} / ${fmt(n - doneAt.length)}`],
    ['time to token p50 / p99 / max s', `${fmt(pct(50), 1)} / ${fmt(pct(99), 1)} / ${fmt(total, 1)}`],
    ['raw argon2 verify/s before / after the fleet → budget s (their mean)', `${fmt(before.verifyPerSecond, 1)} / ${fmt(after.verifyPerSecond, 1)} → ${budgetSeconds.toFixed(1)}`],
    ['argon2 verifications in the service (per agent)', `${fmt(verifications)} (${fmt(verifications / n, 2)})`],
    ["argon2's share of the service's CPU / of the cores' time", `${fmt(100 * share.ofService, 0)} % / ${fmt(100 * share.ofCores, 0)} %`],
    ['service CPU outside argon2 per agent ms', fmt(share.outsideArgon2MsPerAgent, 2)],
    ['effective agents/s (n / total)', fmt(n / total, 1)],
    ['answers by status', [...statuses].sort((a, b) => a[0] - b[0]).map(([s, c]) => `${s}×${c}`).join(' ')],
    ['429/503 with Retry-After / followed by a retry / honoured', `${fmt(sum((o) => o.withRetryAfter))} / ${fmt(sum((o) => o.followed))} / ${fmt(sum((o) => o.honoured))}`],
    ['attempts per agent median / max', `${fmt(spread(attempts)?.median)} / ${fmt(spread(attempts)?.max)}`],
    ['agents refused > 3 times in all (the old default maxRetries 3 may have failed them)', fmt(beyondDefault)],
    ['network errors (retried by the client)', `${fmt(sum((o) => o.networkErrors))}${networkCodes.size ? ` (${[...networkCodes].map(([c, k]) => `${c}×${k}`).join(' ')})` : ''}`],
    ['service peak RSS MiB', fmt(mib(rss.peak))],
    ...[...failures].map(([m, c]) => [`failure ×${c}`, m]),
  ];
  return {
    name: 'fleet',
    text: [`fleet restart (${n} agents, ${clientSettings}, service defaults incl. rate limits; one run):`, table(rows, ['fleet restart', 'value']), table(checkRows(checks), CHECK_HEADER)],
    checks,
    data: {
      agents: n,
      done: doneAt.length,
      p50_s: pct(50),
      p99_s: pct(99),
      total_s: total,
      argon2_per_s: rate.verifyPerSecond,
      argon2_per_s_before: before.verifyPerSecond,
      argon2_per_s_after: after.verifyPerSecond,
      argon2_verifications: verifications,
      argon2_share_of_service_cpu: share.ofService,
      argon2_share_of_cores: share.ofCores,
      service_cpu_outside_argon2_ms_per_agent: share.outsideArgon2MsPerAgent,
      budget_s: budgetSeconds,
      statuses: Object.fromEntries(statuses),
      retry_after: sum((o) => o.withRetryAfter),
      honoured: sum((o) => o.honoured),
      followed: sum((o) => o.followed),
      beyond_default_retries: beyondDefault,
      failures: Object.fromEntries(failures),
      rss_peak_mib: mib(rss.peak),
    },
  };
}
