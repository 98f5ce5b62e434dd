// `npm run bench` (and `npm run soak`: the scenario soak): the bench's one runner. Runs the scenarios of
// bench/scenarios (in their order, or those named by --only), each
// starting what it needs and stopping it before the next, then prints every report and writes
// bench/results/latest.json. Comparisons are medians of interleaved rounds with min–max (lib/rounds.ts,
// lib/stats.ts). autocannon runs inside this process, so the load generator shares the machine's cores with
// every server it measures, the peer's and the bare ceilings' included.
import { mkdirSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseOptions } from './lib/args.js';
import { BenchContext, type ScenarioReport } from './lib/context.js';
import { SCENARIOS } from './scenarios/index.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

async function main(ctx: BenchContext): Promise<void> {
  const { opts, machine } = ctx;
  if (!opts.target && !existsSync(path.join(ROOT, 'dist/src/main.js'))) throw new Error('dist/src/main.js is missing: run `npm run build` first');
  const unknown = opts.only.filter((name) => !SCENARIOS.some((s) => s.name === name));
  if (unknown.length > 0) throw new Error(`unknown scenario(s) ${unknown.join(', ')}; known: ${SCENARIOS.map((s) => s.name).join(', ')}`);
  const chosen = SCENARIOS.filter((s) => (opts.only.length > 0 ? opts.only.includes(s.name) : s.byDefault));
  ctx.log(`${machine.cores} cores, ${machine.cpu_model}, node ${machine.node}; scenarios: ${chosen.map((s) => s.name).join(', ')}`);
  if (machine.loadavg_at_start >= 1) ctx.log(`warning: load average ${machine.loadavg_at_start} at start: other work shares the CPU; figures are UNDER LOAD`);

  const reports: ScenarioReport[] = [];
  for (const scenario of chosen) {
    ctx.log(`== ${scenario.name}: ${scenario.title}`);
    const load = ctx.load();
    const report = await scenario.run(ctx);
    report.data.loadavg_before = load;
    reports.push(report);
    if (report.failed) process.exitCode = 1;
  }

  const totalSeconds = (Date.now() - ctx.started) / 1000;
  const loadEnd = ctx.load();
  const underLoad = machine.loadavg_at_start >= 1;
  console.log(
    [
      '',
      `Agent Credential Exchange benchmark: ${machine.cores} cores (${machine.cpu_model}), node ${machine.node}, ${machine.date}` +
        (opts.quick ? '  [--quick: smoke test, not figures to quote]' : ''),
      `load average ${machine.loadavg_at_start} at start, ${loadEnd} at end${underLoad ? '  [TAKEN UNDER LOAD: not figures to quote]' : ''}`,
      ...reports.flatMap((r) => ['', ...r.text.flatMap((t) => [t, ''])]),
      `total ${totalSeconds.toFixed(0)}s. autocannon runs in the bench process and shares the cores with the server under test.`,
    ].join('\n'),
  );
  const file = opts.out ? path.resolve(opts.out) : path.join(ROOT, 'bench/results/latest.json');
  mkdirSync(path.dirname(file), { recursive: true });
  const result = {
    machine: { ...machine, loadavg_at_end: loadEnd, os_load_note: os.loadavg() },
    options: { ...opts, adminToken: opts.adminToken ? '(set)' : undefined },
    scenarios: Object.fromEntries(reports.map((r) => [r.name, { checks: r.checks, ...r.data }])),
    total_seconds: totalSeconds,
  };
  writeFileSync(file, JSON.stringify(result, null, 2) + '\n');
  ctx.log(`wrote ${path.relative(process.cwd(), file) || file}`);
}

const ctx = new BenchContext(parseOptions(process.argv.slice(2), SCENARIOS.map((s) => `  ${s.name.padEnd(17)} ${s.byDefault ? '(default) ' : ''}${s.title}`).join('\n')));
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    ctx.log(`${signal}: cleaning up`);
    void ctx.cleanup().finally(() => process.exit(130));
  });
}
main(ctx)
  .then(() => ctx.cleanup())
  .catch(async (error) => {
    ctx.log(`failed: ${error instanceof Error ? error.stack ?? error.message : error}`);
    await ctx.cleanup();
    process.exitCode = 1;
  })
  // Agents a scenario gave up on may still sleep between retries: do not wait for them.
  .finally(() => process.exit());
