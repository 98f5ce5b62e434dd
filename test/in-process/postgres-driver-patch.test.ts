// The postgres driver installed is the patched one (scripts/patch-postgres-driver.mjs, run by postinstall):
// without the patch, a Postgres switchover can crash the service from a timer callback
// (test/e2e/postgres-failover.test.ts sees it on a loaded machine). If the driver was upgraded and the
// script now refuses it, read the script's header.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

describe('postgres driver patch', () => {
  it('every copy of the driver in node_modules carries the nextWrite guard', () => {
    const out = execFileSync(process.execPath, ['scripts/patch-postgres-driver.mjs', '--check'], { encoding: 'utf8' });
    expect(out).not.toContain('not patched');
    const esm = readFileSync('node_modules/postgres/src/connection.js', 'utf8');
    const nextWrite = esm.slice(esm.indexOf('function nextWrite(fn) {'), esm.indexOf('function connectTimedOut()'));
    expect(nextWrite).toMatch(/if \(!socket\) \{[^}]*CONNECTION_CLOSED[^}]*return false/);
  });

  it('the image build runs it too (it installs with --ignore-scripts)', () => {
    expect(readFileSync('Dockerfile', 'utf8')).toMatch(/RUN npm ci --omit=dev --ignore-scripts[^\n]*\n(?:#[^\n]*\n)*COPY scripts\/patch-postgres-driver\.mjs scripts\/\nRUN node scripts\/patch-postgres-driver\.mjs\n/);
    expect(JSON.parse(readFileSync('package.json', 'utf8')).scripts.postinstall).toBe('node scripts/patch-postgres-driver.mjs');
  });
});
