// The README is the front door: small enough to read (the long material lives in docs/ and bench/README.md),
// its first commands are the two a newcomer needs, and the environment names its tour documents are the
// ones the demo and the examples read (the same as `ace`): ACE_*, never the older SERVICE_URL / ADMIN_URL.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const mjs = (dir: string) => readdirSync(path.join(ROOT, dir)).filter((f) => f.endsWith('.mjs')).map((f) => `${dir}/${f}`);
const SCRIPTS = ['scripts/demo.mjs', ...mjs('examples'), ...mjs('packages/client/examples'), ...mjs('packages/middleware/examples')];

/** Environment names a script reads as `process.env.NAME` (the refusal of older names reads them by index). */
const envNames = (text: string) => new Set([...text.matchAll(/process\.env\.([A-Z][A-Z0-9_]*)/g)].map((m) => m[1]!));

describe('README', () => {
  it('stays under 15 KB', () => {
    expect(statSync(path.join(ROOT, 'README.md')).size).toBeLessThan(15 * 1024);
  });

  it('opens with the run and the test command', () => {
    const firstBlock = /^```sh\n([\s\S]*?)^```/m.exec(read('README.md'))?.[1] ?? '';
    expect(firstBlock).toMatch(/^npm ci && npm start\b/m);
    expect(firstBlock).toMatch(/^npm test\b/m);
  });

  it('the demo and every example read the service under the ACE_* names, and the docs name each of them', () => {
    expect(SCRIPTS.length).toBeGreaterThanOrEqual(4);
    const documented = read('README.md') + read('examples/README.md');
    const seen = new Set<string>();
    for (const file of SCRIPTS) {
      const names = envNames(read(file));
      for (const old of ['SERVICE_URL', 'ADMIN_URL', 'ADMIN_TOKEN', 'ISSUER']) expect(names.has(old), `${file} reads ${old}`).toBe(false);
      for (const name of names) if (name.startsWith('ACE_')) seen.add(name);
    }
    expect([...seen].sort()).toEqual(['ACE_ADMIN_TOKEN', 'ACE_ADMIN_URL', 'ACE_ISSUER', 'ACE_PUBLIC_URL']);
    for (const name of seen) expect(documented, name).toContain(`\`${name}\``);
    for (const name of ['ACE_PUBLIC_URL', 'ACE_ADMIN_URL', 'ACE_ADMIN_TOKEN']) expect(read('README.md'), name).toContain(`\`${name}\``);
  });

  it('finds a script that reads an older name', () => {
    expect(envNames("const u = process.env.SERVICE_URL ?? x; if (process.env[old]) {}")).toEqual(new Set(['SERVICE_URL']));
  });
});
