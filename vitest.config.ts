import { defineConfig } from 'vitest/config';

// Two projects, run one after the other (groupOrder). "unit": pure logic in process, seconds in all, run
// first so a logic slip fails fast.
// "service": black-box suites that start real service processes against real Postgres and Redis; give
// them time, and run at most two files at once on these 2-core machines.
export default defineConfig({
  test: {
    reporters: ['default'],
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
          exclude: ['test/unit/**'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          pool: 'forks',
          maxWorkers: 2,
        },
      },
    ],
  },
});
