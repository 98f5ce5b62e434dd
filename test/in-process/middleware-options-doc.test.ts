// The middleware's options tables (packages/middleware/README.md, docs/client-and-middleware.md) are generated
// from its source by scripts/middleware-options.mjs: this fails when either file is not the current
// rendering (run `npm run docs:middleware-options`), or when a doc comment names another default than the code.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync, cpSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SCRIPT = path.join(ROOT, 'scripts/middleware-options.mjs');

/** A copy of the files the script reads and writes, to break on purpose (node_modules linked for typescript). */
function sandbox(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ace-options-doc-'));
  mkdirSync(path.join(dir, 'scripts'));
  mkdirSync(path.join(dir, 'docs'));
  copyFileSync(SCRIPT, path.join(dir, 'scripts/middleware-options.mjs'));
  cpSync(path.join(ROOT, 'packages/middleware/src'), path.join(dir, 'packages/middleware/src'), { recursive: true });
  copyFileSync(path.join(ROOT, 'packages/middleware/README.md'), path.join(dir, 'packages/middleware/README.md'));
  copyFileSync(path.join(ROOT, 'docs/client-and-middleware.md'), path.join(dir, 'docs/client-and-middleware.md'));
  execFileSync('ln', ['-s', path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules')]);
  return dir;
}

function check(cwd: string): { ok: boolean; output: string } {
  try {
    return { ok: true, output: execFileSync(process.execPath, ['scripts/middleware-options.mjs', '--check'], { cwd, encoding: 'utf8', stdio: 'pipe' }) };
  } catch (error) {
    const failure = error as { stdout?: string; stderr?: string };
    return { ok: false, output: `${failure.stdout ?? ''}${failure.stderr ?? ''}` };
  }
}

describe('middleware options tables', () => {
  it('are the current rendering of the source, with the defaults the code uses', { timeout: 30_000 }, () => {
    expect(check(ROOT)).toEqual({ ok: true, output: 'middleware options tables are current\n' });
    const docs = readFileSync(path.join(ROOT, 'docs/client-and-middleware.md'), 'utf8');
    for (const row of ['| `revocationFeed.staleAfterSeconds` | `15` |', '| `revocationFeed.socketSilenceSeconds` | `20` |', '| `revocationFeed.openForAtMostSeconds` | `300` |', '| `maxPathLength` | `4096` |']) {
      expect(docs).toContain(row);
      expect(readFileSync(path.join(ROOT, 'packages/middleware/README.md'), 'utf8')).toContain(row);
    }
  });

  it('fail when the code changes a default, and when a doc comment disagrees with the code', { timeout: 30_000 }, () => {
    const dir = sandbox();
    try {
      const verifier = path.join(dir, 'packages/middleware/src/verifier.ts');
      const original = readFileSync(verifier, 'utf8');
      expect(original).toContain('const jwksTimeoutMs = options.jwksTimeoutMs ?? 5000');
      // The code's default moves (and its comment with it): the tables are stale.
      writeFileSync(verifier, original.replace('const jwksTimeoutMs = options.jwksTimeoutMs ?? 5000', 'options.jwksTimeoutMs ?? 9000').replace('Timeout of a JWKS fetch. Default 5000.', 'Timeout of a JWKS fetch. Default 9000.'));
      expect(check(dir)).toMatchObject({ ok: false, output: expect.stringContaining('not the current options table') });
      // Only the code moves: the comment now lies, and the script says so.
      writeFileSync(verifier, original.replace('const jwksTimeoutMs = options.jwksTimeoutMs ?? 5000', 'options.jwksTimeoutMs ?? 9000'));
      expect(check(dir)).toMatchObject({ ok: false, output: expect.stringMatching(/jwksTimeoutMs: its doc comment says "Default 5000" but the code's default is 9000/) });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
