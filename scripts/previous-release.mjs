#!/usr/bin/env node
// The previous release, built from git history for test/e2e/mixed-version.test.ts: `git archive` of its commit
// into .ci/cache/previous-release/<commit>, its dependencies (this checkout's node_modules, linked, when the
// lockfile is the same; else `npm ci --prefer-offline`), `npm run build`. Built once per commit and kept
// (.ci/cache survives between CI runs), so later runs start at once. The commit is ACE_PREVIOUS_RELEASE or
// the last line of .ci/previous-release. `.ci/run` builds it from its start (beside its own install, build
// and in-process project), so the test does not pay for it under the suites' load:
//   node scripts/previous-release.mjs        # prints the commit and where its build is
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const ROOT = path.resolve(import.meta.dirname ?? path.dirname(new URL(import.meta.url).pathname), '..');
const CACHE = path.join(ROOT, '.ci/cache/previous-release');
const WORKSPACE_SCOPE = '@agent-credential-exchange';

function run(command, args, cwd, timeoutMs = 600_000) {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} (in ${cwd}) failed: ${result.error?.message ?? ''}\n${result.stdout}${result.stderr}`.slice(0, 4000));
  return result.stdout;
}

/** The commit named by ACE_PREVIOUS_RELEASE or the last non-comment line of .ci/previous-release. */
export function previousReleaseCommit() {
  const named =
    process.env.ACE_PREVIOUS_RELEASE ??
    readFileSync(path.join(ROOT, '.ci/previous-release'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#')).at(-1);
  if (!named) throw new Error('.ci/previous-release names no commit');
  return run('git', ['rev-parse', '--verify', `${named}^{commit}`], ROOT).trim();
}

/**
 * The same lockfile: this checkout's installed dependencies, one relative link per package (the cache may
 * be restored into another checkout path), except the workspace packages, which must be the previous
 * release's own (its service imports their schemas).
 */
function linkDependencies(work) {
  const modules = path.join(work, 'node_modules');
  mkdirSync(modules);
  for (const name of readdirSync(path.join(ROOT, 'node_modules'))) {
    if (name !== WORKSPACE_SCOPE) symlinkSync(path.relative(modules, path.join(ROOT, 'node_modules', name)), path.join(modules, name));
  }
  mkdirSync(path.join(modules, WORKSPACE_SCOPE));
  for (const pkg of readdirSync(path.join(work, 'packages'))) symlinkSync(`../../packages/${pkg}`, path.join(modules, WORKSPACE_SCOPE, pkg));
}

/** Builds (or finds built) the previous release: { commit, dir, main (its dist/src/main.js), builtInMs (0: from the cache) }. */
export function buildPreviousRelease(commit = previousReleaseCommit()) {
  const dir = path.join(CACHE, commit);
  const main = path.join(dir, 'dist/src/main.js');
  if (existsSync(path.join(dir, '.built')) && existsSync(main)) return { commit, dir, main, builtInMs: 0 };
  const started = Date.now();
  const work = `${dir}.tmp-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  try {
    const tar = `${work}.tar`;
    run('git', ['archive', '--format=tar', '-o', tar, commit], ROOT);
    run('tar', ['-xf', tar, '-C', work], ROOT);
    rmSync(tar, { force: true });
    // ACE_PREVIOUS_RELEASE_OWN_INSTALL=1: never link this checkout's node_modules (.ci/run builds this while
    // its own `npm ci` is still replacing them).
    const sameLock = readFileSync(path.join(work, 'package-lock.json'), 'utf8') === readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8');
    if (sameLock && process.env.ACE_PREVIOUS_RELEASE_OWN_INSTALL !== '1') linkDependencies(work);
    else run('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], work);
    run('npm', ['run', 'build'], work);
    writeFileSync(path.join(work, '.built'), `${new Date().toISOString()}\n`);
    rmSync(dir, { recursive: true, force: true });
    renameSync(work, dir);
  } catch (error) {
    rmSync(work, { recursive: true, force: true });
    throw error;
  }
  return { commit, dir, main, builtInMs: Date.now() - started };
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const built = buildPreviousRelease();
  console.log(`previous release ${built.commit}: ${built.builtInMs === 0 ? 'already built' : `built in ${(built.builtInMs / 1000).toFixed(1)} s`} (${built.dir})`);
}
