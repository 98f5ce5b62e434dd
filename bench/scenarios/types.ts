// A scenario is one measurement of the bench: it starts what it needs, measures (in interleaved rounds
// where it compares), stops what it started and returns its report. Adding one = one file + one line in
// scenarios/index.ts.
import type { BenchContext, ScenarioReport } from '../lib/context.js';

export interface Scenario {
  /** The --only key. */
  name: string;
  /** One line for --help and the log. */
  title: string;
  /** Part of a plain `npm run bench` (false: only with --only). */
  byDefault: boolean;
  run(ctx: BenchContext): Promise<ScenarioReport>;
}
