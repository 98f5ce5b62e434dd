// Deployed-instance mode (`npm run bench -- --target <public URL> --admin-url <URL> --admin-token …`):
// token (warm, cold), listing, JWKS and scope file against a service that is already running, seeded
// through its admin API, in rounds, printing the same table. Nothing is started here; afterwards the
// bench's agents are deactivated and its platform disabled. The deployment's own rate limits apply
// (429 answers are counted, not hidden): raise --warm-agents to spread the per-key token limit.
import type { Scenario } from './types.js';
import type { BenchContext, ScenarioReport } from '../lib/context.js';
import { Workload, ColdPool, post, TOKEN_PATH, LISTING_PATH, JWKS_PATH } from '../lib/workload.js';
import { interleave, loadArm, summaryRows, SUMMARY_HEADER, type Arm } from '../lib/rounds.js';
import { check, checkRows, CHECK_HEADER } from '../lib/checks.js';
import { argon2Tasks } from '../lib/metrics.js';
import { table, type Measurement } from '../lib/report.js';

export const deployed: Scenario = {
  name: 'deployed',
  title: 'token, listing, JWKS, scope file against a running service (--target, --admin-url, --admin-token)',
  byDefault: false,
  run: (ctx) => ctx.scoped((defer) => runDeployed(ctx, defer)),
};

async function runDeployed(ctx: BenchContext, defer: (fn: () => Promise<void> | void) => void): Promise<ScenarioReport> {
  const { opts } = ctx;
  if (!opts.target || !opts.adminUrl || !opts.adminToken) throw new Error('deployed: needs --target, --admin-url and --admin-token');
  const target = { publicUrl: opts.target, adminUrl: opts.adminUrl, adminToken: opts.adminToken };
  const work = new Workload(ctx, target);
  defer(() => work.retire());
  ctx.log(`deployed: seeding ${opts.warmAgents} agents through ${opts.adminUrl} ...`);
  await work.seed(opts.warmAgents);
  // Cold agents cost the service one argon2 hash each to create: a bounded number, split over the rounds.
  const coldPerRound = Math.floor(opts.maxColdAgents / opts.rounds);
  ctx.log(`deployed: seeding ${coldPerRound * opts.rounds} cold agents ...`);
  const cold: ColdPool[] = [];
  for (let r = 0; r < opts.rounds; r++) cold.push(new ColdPool(work.tokenBodies(await work.createAgents(coldPerRound, `cold${r}`))));
  await work.prewarm(4);

  const url = () => opts.target!;
  const failures: number[] = [];
  const count = { after: (m: Measurement, round: number) => void (failures[round] = (failures[round] ?? 0) + m.non2xx + m.errors) };
  let argonBefore: number | null = null;
  const arms: Arm<Measurement>[] = [
    loadArm(ctx, 'token (warm)', url, () => post(TOKEN_PATH, work.tokenBodies()), count),
    {
      name: 'token (cold)',
      run: (round) =>
        loadArm(ctx, 'token (cold)', url, () => cold[round].requests(), {
          onStart: cold[round].onStart,
          beforeMeasure: async () => void (argonBefore = await argon2Tasks(opts.adminUrl!)),
          after: async (m, r) => {
            const after = await argon2Tasks(opts.adminUrl!);
            m.note = `argon2 tasks ${argonBefore !== null && after !== null ? after - argonBefore : '?'}`;
            if (cold[round].exhausted) {
              m.invalid = true;
              m.note += `; pool of ${coldPerRound} ran out: not valid (raise --max-cold-agents)`;
            }
            count.after(m, r);
          },
        }).run(round),
    },
    loadArm(ctx, 'platform listing', url, () => post(LISTING_PATH, work.listingBodies()), count),
    loadArm(ctx, 'JWKS', url, () => [{ method: 'GET', path: JWKS_PATH }], count),
    loadArm(ctx, 'scope file', url, () => [{ method: 'GET', path: work.scopesPath }], count),
  ];
  const results = await interleave(ctx, opts.rounds, arms);
  const checks = [
    check(`token warm p99 ms @${opts.connections} connections`, results['token (warm)'].map((m) => m.p99), { op: '<=', value: 40 }),
    check('non-2xx + errors', failures, { op: '=', value: 0 }),
  ];
  const limited = Object.values(results).flat().reduce((sum, m) => sum + (m?.statusCodes?.['429'] ?? 0), 0);
  const hint = limited > 0
    ? [`${limited} answers were 429: the deployment's per-key token limit (RATE_LIMIT_TOKEN_POINTS per window) caps each agent; ` +
        'raise --warm-agents to spread the load over more keys, or measure on an instance with a higher limit.']
    : [];
  return {
    name: 'deployed',
    text: [
      `deployed instance ${opts.target} (admin ${opts.adminUrl}); ${opts.rounds} round(s), ${opts.connections} connections, ${opts.duration}s after ${opts.warmup}s warm-up`,
      table(summaryRows(results), SUMMARY_HEADER),
      table(checkRows(checks), CHECK_HEADER),
      ...hint,
    ],
    checks,
    data: { target: opts.target, results },
  };
}
