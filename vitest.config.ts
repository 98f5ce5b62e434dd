import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

// The service files that take longest, most of it waiting (real outages, Prometheus evaluations, stale
// bounds, failovers), longest first: started first, they overlap the rest instead of ending the run alone.
// Wall times of one quiet run (2026-11-27). Vitest orders by its own cache of durations when it has one;
// a clean clone (CI) has none and would order by file size.
const LONG_RUNNING = [
  'test/e2e/alerts-prometheus.test.ts', // 118 s
  'test/integration/fault-matrix.test.ts', // 46 s
  'test/e2e/fault-matrix-redis-topologies.test.ts', // 42 s
  'test/integration/clock-skew.test.ts', // 37 s
  'test/integration/lifecycle.test.ts', // 35 s
  'test/integration/revocation-feed-proxy.test.ts', // 27 s
  'test/e2e/middleware-frameworks.test.ts', // 25 s
  'test/integration/client-middleware.test.ts', // 23 s
  'test/integration/reliability-workers.test.ts', // 22 s
  'test/e2e/packages.test.ts', // 20 s
];

/** Every suite under test/ (repo-relative paths). */
export function testFiles(dir = 'test'): string[] {
  const root = import.meta.dirname;
  return readdirSync(path.join(root, dir)).flatMap((name) => {
    const rel = path.posix.join(dir, name);
    if (statSync(path.join(root, rel)).isDirectory()) return name === 'node_modules' ? [] : testFiles(rel);
    return rel.endsWith('.test.ts') ? [rel] : [];
  });
}

/**
 * The packages' suites: every suite that imports the client, the middleware or the protocol package (which
 * the middleware carries inside its dist, so it runs on Node 20 too), and those that pack, install or
 * type-check them (named middleware-* or packages). Read from the files, so a new package suite cannot be
 * left off the Node 20 line.
 */
function packageSuites(): string[] {
  const importsPackage = /from '(?:\.\.\/)+packages\/(?:client|middleware|protocol)\/|from '@agent-credential-exchange\/(?:client|middleware|protocol)['\/]/;
  return testFiles().filter(
    (file) => /\/(middleware-[a-z0-9-]+|packages)\.test\.ts$/.test(file) || importsPackage.test(readFileSync(path.join(import.meta.dirname, file), 'utf8')),
  );
}

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

// Three homes, three projects:
// - "in-process": no service process, no network beyond loopback servers a test starts itself (the core, the
//   adapters on memory ports, `inject`, the middleware in process); seconds in all, run first so a logic slip
//   fails fast.
// - "service": `test/integration/` (suites that start real service processes against real Postgres and Redis)
//   and `test/e2e/` (outside clients and tools: Python, the MCP SDK, Prometheus, k8s/, packed packages, store
//   topologies). Most of it waits on real outages and failovers, so three files run at once on 2 cores.
// - "packages": the suites of the client and middleware packages (in process and against the service), which
//   still support Node 20: CI runs this project on Node 20 and everything on Node 22.
export const PACKAGE_SUITES = packageSuites();
const SERVICE_SUITE_SETTINGS = { testTimeout: 60_000, hookTimeout: 120_000, pool: 'forks' as const };

export default defineConfig({
  test: {
    reporters: ['default'],
    sequence: { sequencer: LongRunningFirst },
    maxWorkers: 3,
    projects: [
      {
        test: {
          name: 'in-process',
          include: ['test/in-process/**/*.test.ts'],
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          name: 'service',
          sequence: { groupOrder: 1 },
          include: ['test/integration/**/*.test.ts', 'test/e2e/**/*.test.ts'],
          ...SERVICE_SUITE_SETTINGS,
        },
      },
      {
        test: {
          name: 'packages',
          sequence: { groupOrder: 2 },
          include: PACKAGE_SUITES,
          ...SERVICE_SUITE_SETTINGS,
        },
      },
    ],
  },
});
