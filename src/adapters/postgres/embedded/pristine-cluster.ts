// The embedded default's first start without initdb. PGlite's initdb, run on a first start, is where the
// embedded service's memory peaked (~800 MiB, docs/storage.md#memory-of-the-embedded-default): it starts a
// second WASM Postgres for initdb, copies that instance's whole 128 MiB heap before every backend run
// (and so touches all of it), and brings the result over through an in-memory tarball. Instead, the build
// (scripts/pristine-cluster.mjs) runs initdb once with the same PGlite, shuts it down cleanly and packs
// the data directory; a first start unpacks it into DATA_DIR (in a short-lived child process, fsynced,
// renamed into place), and PGlite opens it like any existing cluster.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import * as tar from 'tar';

/** The installed PGlite's version: a cluster packed by another version is not used. */
export function pgliteVersion(): string {
  // The package's exports do not include package.json: find it next to the resolved entry (dist/index.js).
  const entry = fileURLToPath(import.meta.resolve('@electric-sql/pglite'));
  const manifest = path.join(path.dirname(entry), '..', 'package.json');
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
}

/** Where the build puts the packed cluster: next to this module, named by the PGlite version that made it. */
export function pristineArchivePath(version = pgliteVersion()): string {
  return fileURLToPath(new URL(`./pristine-cluster-${version}.tar.gz`, import.meta.url));
}

/**
 * Build time: runs PGlite's initdb in a scratch directory, shuts the cluster down cleanly (no
 * postmaster.pid, a shutdown checkpoint: the first start needs no recovery) and packs it into `file`.
 */
export async function packPristineCluster(file: string, scratchDir: string): Promise<void> {
  const { PGlite } = await import('@electric-sql/pglite');
  const db = await PGlite.create({ dataDir: scratchDir });
  await db.close();
  if (!existsSync(path.join(scratchDir, 'PG_VERSION'))) throw new Error(`initdb left no cluster in ${scratchDir}`);
  if (existsSync(path.join(scratchDir, 'postmaster.pid'))) throw new Error('the pristine cluster was not shut down cleanly (postmaster.pid is left)');
  await tar.c({ file, gzip: true, cwd: scratchDir, portable: true }, readdirSync(scratchDir));
}

export type ClusterOrigin = 'existing' | 'seeded' | 'initdb';
const ORIGINS: readonly string[] = ['existing', 'seeded', 'initdb'] satisfies ClusterOrigin[];

/** seedCluster in a child process (seed-cluster-process.ts), so that its buffers never reach this one. */
export async function seedClusterInChild(dir: string, archive = pristineArchivePath()): Promise<ClusterOrigin> {
  const plan = seedPlan(dir, archive);
  if (plan !== 'unpack') return plan; // a restart, or nothing to unpack: no process to spawn
  const script = fileURLToPath(new URL('./seed-cluster-process.js', import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, [script, dir, archive], { encoding: 'utf8' });
  if (!ORIGINS.includes(stdout)) throw new Error(`unpacking the pristine cluster answered ${JSON.stringify(stdout.slice(0, 100))}`);
  return stdout as ClusterOrigin;
}

/**
 * Run time, before PGlite opens `dir`: a missing or empty `dir` gets the packed cluster. Returns
 * 'existing' when `dir` holds a cluster, 'seeded' when it was unpacked, 'initdb' when PGlite must make one
 * itself (no packed cluster for this PGlite version, or `dir` holds files that are not a cluster: those
 * are not ours to replace).
 */
export async function seedCluster(dir: string, archive = pristineArchivePath()): Promise<ClusterOrigin> {
  const plan = seedPlan(dir, archive);
  if (plan !== 'unpack') return plan;
  // Unpacked beside the target and renamed into place: an interrupted first start leaves no half cluster.
  const staging = `${dir}.seeding`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true, mode: 0o700 });
  // Synchronous and in small reads: the least memory (the default reads up to 16 MiB at once).
  tar.x({ file: archive, cwd: staging, strict: true, preserveOwner: false, sync: true, maxReadSize: 65_536 });
  // Postgres fsyncs only what it writes; the unpacked files must be on the disk before the first commit
  // is acknowledged (as initdb's own final sync would have made them).
  await fsyncTree(staging);
  if (existsSync(dir)) rmSync(dir, { recursive: true }); // empty (checked above)
  renameSync(staging, dir);
  await fsyncPath(path.dirname(dir));
  return 'seeded';
}

function seedPlan(dir: string, archive: string): Exclude<ClusterOrigin, 'seeded'> | 'unpack' {
  if (existsSync(path.join(dir, 'PG_VERSION'))) return 'existing';
  if (existsSync(dir) && readdirSync(dir).length > 0) return 'initdb';
  return existsSync(archive) ? 'unpack' : 'initdb';
}

async function fsyncPath(file: string): Promise<void> {
  const handle = await open(file, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** fsyncs every file and directory under `root` (and `root`), a few at a time on libuv's pool. */
async function fsyncTree(root: string): Promise<void> {
  const dirs = [root];
  const files: string[] = [];
  for (let i = 0; i < dirs.length; i++) {
    for (const entry of readdirSync(dirs[i], { withFileTypes: true })) {
      if (entry.isDirectory()) dirs.push(path.join(dirs[i], entry.name));
      else if (entry.isFile()) files.push(path.join(dirs[i], entry.name));
    }
  }
  // Files first, then the directories holding their entries, deepest first.
  const paths = [...files, ...dirs.reverse()];
  const BATCH = 8;
  for (let i = 0; i < paths.length; i += BATCH) await Promise.all(paths.slice(i, i + BATCH).map(fsyncPath));
}
