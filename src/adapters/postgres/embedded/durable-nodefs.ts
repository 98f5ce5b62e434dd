// PGlite's NodeFS maps the data directory into the WASM Postgres through Emscripten's NODEFS, whose files
// have no fsync: every fsync() Postgres issues ends as a no-op (and fdatasync() is a no-op syscall stub),
// so nothing acknowledged would ever be forced to the disk. This subclass gives NODEFS files a real fsync
// (Node's fsyncSync on the host file descriptor). Together with the start parameters below (fsync on, WAL
// flushed with fsync() rather than fdatasync()), each commit is on the disk before it is acknowledged.
import { fsyncSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { NodeFS } from '@electric-sql/pglite/nodefs';

type InitArgs = Parameters<NodeFS['init']>;
interface NodeStream {
  nfd?: number;
}

export class DurableNodeFS extends NodeFS {
  override async init(pg: InitArgs[0], opts: InitArgs[1]): ReturnType<NodeFS['init']> {
    const result = await super.init(pg, opts);
    const preRun = result.emscriptenOpts.preRun ?? [];
    preRun.push((mod) => {
      const streamOps = (mod.FS.filesystems.NODEFS as unknown as { stream_ops: Record<string, unknown> }).stream_ops;
      // Emscripten's fd_sync (what fsync() becomes) calls stream_ops.fsync when present; 0 is success.
      streamOps.fsync = (stream: NodeStream) => {
        if (stream.nfd !== undefined) fsyncSync(stream.nfd);
        return 0;
      };
    });
    result.emscriptenOpts.preRun = preRun;
    return result;
  }
}

/**
 * Postgres' buffers live in PGlite's WASM linear memory, which grows and never shrinks: the defaults
 * (shared_buffers 128MB) alone cost ~130 MiB of resident memory that this service's few small tables
 * never need.
 */
export const EMBEDDED_MEMORY_PARAMS = ['-c', 'shared_buffers=16MB', '-c', 'temp_buffers=1MB', '-c', 'work_mem=1MB', '-c', 'maintenance_work_mem=8MB'];

/**
 * PGlite's own start parameters minus `-F` (which turns fsync off), with the WAL flushed by fsync():
 * Postgres' default on Linux, fdatasync(), is a stub that does nothing in PGlite's WASM runtime.
 */
export function durableStartParams(): string[] {
  const defaults = (PGlite as unknown as { defaultStartParams: string[] }).defaultStartParams;
  return [
    ...defaults.filter((param) => param !== '-F'),
    '-c', 'fsync=on', '-c', 'wal_sync_method=fsync', '-c', 'synchronous_commit=on',
    ...EMBEDDED_MEMORY_PARAMS,
  ];
}
