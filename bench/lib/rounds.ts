// Interleaved rounds: every arm (the service, a bare ceiling, the peer, ...) is measured once per round,
// and the order rotates from round to round, so a slow minute on the machine lands on every arm alike.
// Figures are then the median of the rounds with their min–max (stats.ts).
import type { BenchContext } from './context.js';
import { measure, type RequestSpec } from './load.js';
import type { Measurement } from './report.js';
import { fmt } from './report.js';
import { formatSpread, spread } from './stats.js';

export interface Arm<T> {
  name: string;
  run: (round: number) => Promise<T>;
}

/**
 * Runs `rounds` rounds of every arm; result[name][round]. Round r starts at arm `shift(r)` (default r: the
 * order moves one place a round) and wraps around.
 */
export async function interleave<T>(ctx: BenchContext, rounds: number, arms: Arm<T>[], shift: (round: number) => number = (r) => r): Promise<Record<string, T[]>> {
  const results: Record<string, T[]> = Object.fromEntries(arms.map((a) => [a.name, []]));
  for (let round = 0; round < rounds; round++) {
    const start = shift(round);
    const order = arms.map((_, i) => arms[(((i + start) % arms.length) + arms.length) % arms.length]);
    for (const arm of order) {
      results[arm.name][round] = await arm.run(round);
    }
  }
  return results;
}

/**
 * A shift for interleave() that spreads the rounds' starting points evenly over `groups` groups of
 * `size` adjacent arms (kept together, e.g. a topology's warm and cold arms): with many arms and few
 * rounds, moving one place a round would leave every arm in about the same spot of every round.
 */
export function spreadShift(groups: number, size: number, rounds: number): (round: number) => number {
  return (round) => size * Math.round((round * groups) / Math.max(1, rounds));
}

/** A load arm: warm-up then measurement against `url` with the scenario's connections and durations. */
export function loadArm(
  ctx: BenchContext,
  name: string,
  url: () => string,
  requests: () => RequestSpec[],
  hooks: {
    before?: (round: number) => Promise<void> | void;
    /** Between warm-up and measurement. */
    beforeMeasure?: () => Promise<void>;
    after?: (m: Measurement, round: number) => Promise<void> | void;
    onStart?: (stop: () => void) => void;
    note?: string;
  } = {},
): Arm<Measurement> {
  return {
    name,
    run: async (round) => {
      await hooks.before?.(round);
      const result = await measure({
        url: url(),
        connections: ctx.opts.connections,
        duration: ctx.opts.duration,
        warmup: ctx.opts.warmup,
        requests: requests(),
        onStart: hooks.onStart,
        beforeMeasure: hooks.beforeMeasure,
      });
      const m: Measurement = { name, ...result, note: hooks.note };
      await hooks.after?.(m, round);
      ctx.log(`  round ${round + 1} ${name}: ${fmt(m.rps)} req/s, p50 ${fmt(m.p50, 1)} ms, p99 ${fmt(m.p99, 1)} ms, non-2xx ${m.non2xx}, errors ${m.errors}${m.note ? `; ${m.note}` : ''}`);
      return m;
    },
  };
}

/** One table row per arm: req/s, p50, p99 as median (min–max) of the rounds, and non-2xx/errors summed. */
export function summaryRows(results: Record<string, Measurement[]>): string[][] {
  return Object.entries(results).map(([name, list]) => {
    const all = list.filter(Boolean);
    // A round marked invalid (e.g. the cold pool ran dry) is shown in the log but left out of the medians.
    const ms = all.filter((m) => !m.invalid);
    const invalid = all.length - ms.length;
    const codes = new Map<string, number>();
    for (const m of ms) for (const [code, n] of Object.entries(m.statusCodes ?? {})) if (!code.startsWith('2')) codes.set(code, (codes.get(code) ?? 0) + n);
    return [
      name,
      formatSpread(spread(ms.map((m) => m.rps))),
      formatSpread(spread(ms.map((m) => m.p50)), 1),
      formatSpread(spread(ms.map((m) => m.p99)), 1),
      String(ms.reduce((s, m) => s + m.non2xx, 0)) + (codes.size ? ` (${[...codes].map(([c, n]) => `${c}×${n}`).join(' ')})` : ''),
      String(ms.reduce((s, m) => s + m.errors, 0)),
      (invalid ? `${invalid} round(s) invalid, left out; ` : '') + (all.find((m) => m.note)?.note ?? ''),
    ];
  });
}

export const SUMMARY_HEADER = ['measurement (median of rounds, min–max)', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'errors', 'note'];
