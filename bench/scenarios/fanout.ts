// Revocation fan-out: one revocation published to 1,000 and 10,000 WebSocket subscribers on one service
// process; p50/p99 from the admin write to each subscriber's receipt, and memory per subscriber. The
// measurement itself lives in bench/lib/fanout.ts.
import type { Scenario } from './types.js';
import { fanoutTable, revocationFanout } from '../lib/fanout.js';

export const fanout: Scenario = {
  name: 'fanout',
  title: 'revocation fan-out: one revocation to 1,000 and 10,000 WebSocket subscribers (p99 publish-to-receive, memory per subscriber)',
  byDefault: true,
  async run(ctx) {
    const sizes = ctx.opts.fanoutSizes;
    const points = await revocationFanout({ embedded: ctx.opts.embedded, sizes, uvThreads: ctx.opts.uvThreads, log: (m) => ctx.log(m) });
    return {
      name: 'fanout',
      text: [`Revocation fan-out (one service process; admin write to receipt at each subscriber)\n${fanoutTable(points)}`],
      checks: [],
      data: { points },
    };
  },
};
