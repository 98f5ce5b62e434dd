// The embedded default: real Postgres (PGlite, WASM) in DATA_DIR, exposed on a loopback socket so the
// very same `postgres` driver and SQL run against it as against a Postgres server. Durable: every commit
// is fsynced to the disk before it is acknowledged (durable-nodefs.ts).
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import v8 from 'node:v8';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { DurableNodeFS, durableStartParams } from './durable-nodefs.js';
import { seedClusterInChild, type ClusterOrigin } from './pristine-cluster.js';

export interface EmbeddedPostgres {
  url: string;
  /** Where the cluster came from: opened, unpacked from the build's pristine cluster, or PGlite's initdb. */
  cluster: ClusterOrigin;
  stop(): Promise<void>;
}

/**
 * V8 compiles the 9 MB Postgres WASM module with its baseline compiler (Liftoff) and recompiles the hot
 * functions with TurboFan on background threads; those compilations leave ~40-50 MiB resident in malloc's
 * per-thread arenas for good. Liftoff's code alone runs this service's small queries about as fast
 * (docs/storage.md#memory-of-the-embedded-default). Read when a WASM module is compiled, so set before
 * PGlite compiles its module; it concerns WASM only (no other WASM runs in this process).
 */
export function useBaselineWasmCompilerOnly(): void {
  v8.setFlagsFromString('--liftoff-only');
}

export async function startEmbeddedPostgres(dataDir: string): Promise<EmbeddedPostgres> {
  const dir = path.join(dataDir, 'pglite');
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const cluster = await seedClusterInChild(dir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  useBaselineWasmCompilerOnly();
  const db = await PGlite.create({ fs: new DurableNodeFS(dir), startParams: durableStartParams() });
  // PGlite runs one query at a time; the socket server queues the rest.
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0, maxConnections: 4 });
  await server.start();
  const hostPort = server.getServerConn();
  return {
    // Named statements: every socket connection shares PGlite's one session, and the driver's unnamed
    // statements take two round trips (parse, then bind), between which another connection's parse would
    // replace the unnamed statement ("invalid input syntax for type json" on the wrong parameters).
    url: `postgres://postgres@${hostPort}/postgres?sslmode=disable&prepare=true`,
    cluster,
    async stop() {
      await server.stop();
      await db.close();
    },
  };
}
