// The cold token arm (every request an agent never requested before, so one argon2 verification each) and
// the argon2 task count read from the service's /metrics around a measurement, shared by the scenarios
// that measure the token endpoint warm and cold (compare, topologies).
import type { BenchContext } from './context.js';
import { argon2Tasks } from './metrics.js';
import type { Measurement } from './report.js';
import { loadArm, type Arm } from './rounds.js';
import type { ColdPool } from './workload.js';

type Hooks = NonNullable<Parameters<typeof loadArm>[4]>;

export interface Argon2Counter {
  beforeMeasure: () => Promise<void>;
  after: (m: Measurement) => Promise<void>;
}

/** argon2 tasks during the measured part (from /metrics): ~0 for warm, ~1 per request for cold. */
export function argon2Counter(adminUrl: string): Argon2Counter {
  let before: number | null = null;
  return {
    beforeMeasure: async () => void (before = await argon2Tasks(adminUrl)),
    after: async (m) => {
      const after = await argon2Tasks(adminUrl);
      if (before !== null && after !== null) m.argon2Verifications = after - before;
      m.note = [m.note, `argon2 tasks ${m.argon2Verifications ?? '?'}`].filter(Boolean).join('; ');
    },
  };
}

/**
 * Token requests from agents never seen before, from `pools[round]` (one pool per round); a round whose
 * pool ran dry is marked invalid (a reused agent would be warm and flatter the figure).
 */
export function coldArm(
  ctx: BenchContext,
  name: string,
  url: () => string,
  pools: ColdPool[],
  serviceHooks: (extra?: Hooks) => Hooks,
  countArgon2: Argon2Counter,
): Arm<Measurement> {
  return {
    name,
    run: (round) => {
      const current = pools[round];
      return loadArm(ctx, name, url, () => current.requests(), serviceHooks({
        onStart: current.onStart,
        beforeMeasure: () => countArgon2.beforeMeasure(),
        after: async (m) => {
          await countArgon2.after(m);
          // Tokens answered, not bodies handed out: checks still waiting when the load stops are dropped
          // unrun (their clients left), so counting bodies overstated the agents by about a connection each.
          m.note = `${m.ok2xx} tokens to fresh agents; ${m.note}`;
          if (current.exhausted) {
            m.invalid = true;
            m.note += '; POOL RAN OUT: round not counted';
          }
        },
      })).run(round);
    },
  };
}

/**
 * Never-used agents per round of a cold arm: enough for the warm-up and the measurement at twice the
 * machine's raw argon2 rate (never below `floor`/s, default 50), plus two connections' worth.
 */
export function coldPoolSize(argon2PerSecond: number, opts: { duration: number; warmup: number; connections: number }, floor = 50): number {
  return Math.ceil(Math.max(argon2PerSecond, floor) * (opts.duration + opts.warmup) * 2) + 2 * opts.connections;
}
