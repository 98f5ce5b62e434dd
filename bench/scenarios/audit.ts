// The audit trail's cost: warm tokens with AUDIT=off and AUDIT=on, fresh services alternating in each
// round with the same seed, and the trail's bytes per event on disk (bench/lib/audit.ts).
import type { Scenario } from './types.js';
import { auditComparison } from '../lib/audit.js';
import { check, checkRows, CHECK_HEADER } from '../lib/checks.js';
import { table } from '../lib/report.js';

export const audit: Scenario = {
  name: 'audit',
  title: 'audit trail cost: warm tokens with the trail off and on (ratio, p99), bytes per event on disk',
  byDefault: true,
  async run(ctx) {
    const { opts } = ctx;
    const rounds = Math.max(1, opts.rounds);
    const result = await auditComparison(
      { embedded: opts.embedded, connections: opts.connections, duration: opts.duration, warmup: opts.warmup, cores: opts.cores, uvThreads: opts.uvThreads, agents: 50 },
      (m) => ctx.log(m),
      rounds,
    );
    const ratios = result.on.map((on, i) => on.rps / Math.max(1, result.off[i]?.rps ?? on.rps));
    const checks = [
      check('token warm, audit on / off', ratios, { op: '>=', value: 0.9 }),
      check(`token warm, audit on, p99 ms @${opts.connections}`, result.on.map((m) => m.p99), { op: '<=', value: 40 }),
      check('audit bytes per event on disk', result.bytesPerEvent === null ? [] : [result.bytesPerEvent], null),
    ];
    return {
      name: 'audit',
      text: [`Audit trail (AUDIT=off vs on, ${rounds} round(s))\n${table(checkRows(checks), CHECK_HEADER)}`],
      checks,
      data: { ...result },
    };
  },
};
