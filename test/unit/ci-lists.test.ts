// .ci/node22-only names the service suites CI runs on Node 22 only: each path must be a service suite that
// exists, so a renamed or removed file cannot leave the list silently excluding nothing (or something else).
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

describe('.ci/node22-only', () => {
  const lines = readFileSync(path.join(ROOT, '.ci/node22-only'), 'utf8').split('\n').map((l) => l.replace(/#.*/, '').trim()).filter(Boolean);

  it('lists existing service suites, one path per line, each once', () => {
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      expect(line, 'one path per line').toMatch(/^test\/[a-z0-9-]+\.test\.ts$/);
      expect(existsSync(path.join(ROOT, line)), `${line} exists`).toBe(true);
    }
    expect(new Set(lines).size).toBe(lines.length);
  });
});
