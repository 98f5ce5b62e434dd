// Where the test files live and what CI's Node 20 line runs: every suite sits in one of the three homes
// (vitest.config.ts runs nothing elsewhere, so a file left outside would silently never run), and the
// "packages" project (CI's Node 20 line: the client and middleware still support it) holds the suites of
// those packages and nothing that tests only the service.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_SUITES, testFiles } from '../../vitest.config.js';

const HOMES = ['test/in-process/', 'test/integration/', 'test/e2e/'];

describe('test homes', () => {
  const files = testFiles();

  it('every suite lives in test/in-process, test/integration or test/e2e', () => {
    expect(files.length).toBeGreaterThan(50);
    expect(files.filter((file) => !HOMES.some((home) => file.startsWith(home)))).toEqual([]);
  });

  it('the packages project holds the package suites, in process and against the service', () => {
    for (const suite of ['test/in-process/middleware-conformance.test.ts', 'test/integration/client-retry.test.ts', 'test/e2e/middleware-frameworks.test.ts', 'test/e2e/packages.test.ts']) {
      expect(PACKAGE_SUITES).toContain(suite);
    }
    for (const serviceOnly of ['test/integration/lifecycle.test.ts', 'test/in-process/architecture.test.ts', 'test/e2e/alerts-prometheus.test.ts']) {
      expect(PACKAGE_SUITES).not.toContain(serviceOnly);
    }
    expect(PACKAGE_SUITES.every((suite) => files.includes(suite) && path.posix.normalize(suite) === suite)).toBe(true);
  });
});
