import { defineConfig } from 'vitest/config';

// Black-box suites start real service processes: give them time, and run at most two files at once
// on these 2-core machines.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default'],
  },
});
