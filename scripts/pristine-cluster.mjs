// Build step (npm run build, after tsc): packs the embedded default's pristine cluster, PGlite's initdb
// run once here rather than on every first start (src/adapters/postgres/embedded/pristine-cluster.ts,
// docs/storage.md#memory-of-the-embedded-default). initdb takes ~10 s and ~700 MiB, so the archive is kept
// per PGlite version in node_modules/.cache and only copied into dist on later builds.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packPristineCluster, pgliteVersion, pristineArchivePath } from '../dist/src/adapters/postgres/embedded/pristine-cluster.js';

const version = pgliteVersion();
const target = pristineArchivePath(version);
const cacheDir = path.resolve('node_modules/.cache/agent-credential-exchange');
const cached = path.join(cacheDir, path.basename(target));

if (!existsSync(cached)) {
  mkdirSync(cacheDir, { recursive: true });
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'ace-pristine-'));
  const partial = `${cached}.${process.pid}.partial`;
  try {
    const started = performance.now();
    await packPristineCluster(partial, path.join(scratch, 'pgdata'));
    renameSync(partial, cached);
    console.log(`pristine cluster for PGlite ${version} packed in ${((performance.now() - started) / 1000).toFixed(1)} s: ${cached}`);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
    rmSync(partial, { force: true });
  }
}
copyFileSync(cached, target);
