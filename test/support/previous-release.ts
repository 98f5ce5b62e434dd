// The previous release, built from git history for the mixed-version test: `git archive` of its commit into
// .ci/cache/previous-release/<commit>, its dependencies (this checkout's node_modules when the lockfile is
// the same, else `npm ci --prefer-offline`), `npm run build`. Built once per commit and kept (CI caches
// .ci/cache), so later runs start at once. The commit is ACE_PREVIOUS_RELEASE or .ci/previous-release.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../../kit/service.js';

const CACHE = path.join(REPO_ROOT, '.ci/cache/previous-release');

export interface PreviousRelease {
  commit: string;
  dir: string;
  /** Its dist/src/main.js. */
  main: string;
  /** How long the build took now (0 when it came from the cache). */
  builtInMs: number;
}

function run(command: string, args: string[], cwd: string, timeoutMs = 300_000): string {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} (in ${cwd}) failed: ${result.error?.message ?? ''}\n${result.stdout}${result.stderr}`.slice(0, 4000));
  return result.stdout;
}

/** The commit named by ACE_PREVIOUS_RELEASE or the last non-comment line of .ci/previous-release. */
export function previousReleaseCommit(): string {
  const named =
    process.env.ACE_PREVIOUS_RELEASE ??
    readFileSync(path.join(REPO_ROOT, '.ci/previous-release'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#')).at(-1);
  if (!named) throw new Error('.ci/previous-release names no commit');
  return run('git', ['rev-parse', '--verify', `${named}^{commit}`], REPO_ROOT).trim();
}

const WORKSPACE_SCOPE = '@agent-credential-exchange';

/**
 * The same lockfile: this checkout's installed dependencies, one link per package, except the workspace
 * packages, which must be the previous release's own (its service imports their schemas).
 */
function linkDependencies(work: string): void {
  const modules = path.join(work, 'node_modules');
  mkdirSync(modules);
  for (const name of readdirSync(path.join(REPO_ROOT, 'node_modules'))) {
    if (name === WORKSPACE_SCOPE) continue;
    // Relative: the cache may be restored into another checkout path.
    symlinkSync(path.relative(modules, path.join(REPO_ROOT, 'node_modules', name)), path.join(modules, name));
  }
  mkdirSync(path.join(modules, WORKSPACE_SCOPE));
  for (const pkg of readdirSync(path.join(work, 'packages'))) symlinkSync(`../../packages/${pkg}`, path.join(modules, WORKSPACE_SCOPE, pkg));
}

export function buildPreviousRelease(commit = previousReleaseCommit()): PreviousRelease {
  const dir = path.join(CACHE, commit);
  const main = path.join(dir, 'dist/src/main.js');
  const done = path.join(dir, '.built');
  if (existsSync(done) && existsSync(main)) return { commit, dir, main, builtInMs: 0 };
  const started = Date.now();
  const work = `${dir}.tmp-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  try {
    const tar = path.join(work, '..', `${commit}.tar`);
    run('git', ['archive', '--format=tar', '-o', tar, commit], REPO_ROOT);
    run('tar', ['-xf', tar, '-C', work], REPO_ROOT);
    rmSync(tar, { force: true });
    const sameLock = readFileSync(path.join(work, 'package-lock.json'), 'utf8') === readFileSync(path.join(REPO_ROOT, 'package-lock.json'), 'utf8');
    if (sameLock) linkDependencies(work);
    else {
      run('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], work);
    }
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
