import { readFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

// ACE_TEST_EXCLUDE_LIST names a file of service suites to leave out of this run (one path per line, `#`
// comments): .ci/run gives .ci/node22-only to its Node 20 run. (vitest's --exclude does not reach projects.)
const excludedSuites = process.env.ACE_TEST_EXCLUDE_LIST
  ? readFileSync(process.env.ACE_TEST_EXCLUDE_LIST, 'utf8').split('\n').map((line) => line.replace(/#.*/, '').trim()).filter(Boolean)
  : [];

// The service files that take longest, most of it waiting (real outages, Prometheus evaluations, stale
// bounds, failovers), longest first: started first, they overlap the rest instead of ending the run alone.
// Wall times of one quiet run (2026-11-27). Vitest orders by its own cache of durations when it has one;
// a clean clone (CI) has none and would order by file size.
const LONG_RUNNING = [
  'test/alerts-prometheus.test.ts', // 118 s
  'test/fault-matrix.test.ts', // 46 s
  'test/fault-matrix-redis-topologies.test.ts', // 42 s
  'test/clock-skew.test.ts', // 37 s
  'test/lifecycle.test.ts', // 35 s
  'test/revocation-feed-proxy.test.ts', // 27 s
  'test/middleware-frameworks.test.ts', // 25 s
  'test/client-middleware.test.ts', // 23 s
  'test/reliability-workers.test.ts', // 22 s
  'test/packages.test.ts', // 20 s
];

class LongRunningFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (file: TestSpecification) => {
      const at = LONG_RUNNING.findIndex((name) => file.moduleId.endsWith(name));
      return at < 0 ? LONG_RUNNING.length : at;
    };
    // Stable: the projects' order (groupOrder) first, then the list, then vitest's own order.
    return sorted
      .map((file, index) => ({ file, index }))
      .sort((a, b) => a.file.project.config.sequence.groupOrder - b.file.project.config.sequence.groupOrder || rank(a.file) - rank(b.file) || a.index - b.index)
      .map(({ file }) => file);
  }
}

// Two projects, run one after the other (groupOrder). "unit": pure logic in process, seconds in all, run
// first so a logic slip fails fast.
// "service": black-box suites that start real service processes against real Postgres and Redis; give
// them time, and run at most two files at once on these 2-core machines.
export default defineConfig({
  test: {
    reporters: ['default'],
    sequence: { sequencer: LongRunningFirst },
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          name: 'service',
          sequence: { groupOrder: 1 },
          include: ['test/**/*.test.ts'],
          exclude: ['test/unit/**', ...excludedSuites],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          pool: 'forks',
          maxWorkers: 2,
        },
      },
    ],
  },
});
