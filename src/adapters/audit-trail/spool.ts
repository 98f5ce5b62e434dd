// The local spool: where audit events go while Postgres cannot take them. Append-only JSON-lines files
// in DATA_DIR/audit-spool, one batch per write, fsync'd before the batch's requests are answered.
//
// Files are segments named spool-<pid>-<instance>-<n>.open while this process appends to them; sealing
// renames a segment to .ready (nothing appends to it any more) so it can be drained into Postgres and
// deleted. Segments left by a process that died (SIGKILL, OOM, a crash) are claimed by renaming them to
// a name of our own (rename is atomic: one claimer wins) and drained the same way. Draining twice is
// harmless: every event keeps its id, and the table ignores an (at, id) it already has.
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, renameSync, statSync } from 'node:fs';
import { open, readFile, unlink, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { AuditEvent } from '../../core/audit/events.js';

const NAME = /^spool-(\d+)-([0-9a-f]+)-(\d+)\.(open|ready)$/;

export class SpoolFullError extends Error {
  constructor() {
    super('audit spool is full (AUDIT_SPOOL_MAX_BYTES)');
    this.name = 'SpoolFullError';
  }
}

export interface SpoolSegment {
  path: string;
  /** Left by another (dead) process: its events were not counted in this process's depth. */
  claimed: boolean;
}

export class Spool {
  readonly dir: string;
  private readonly instance = randomBytes(4).toString('hex');
  private sequence = 0;
  private active: { handle: FileHandle; path: string; bytes: number } | undefined;
  /** Appends and seals run one at a time, in order. */
  private chain: Promise<unknown> = Promise.resolve();
  private bytesOnDisk = 0;
  /** Events in spool files not yet drained (this process's files and the ones it claimed). */
  depth = 0;

  constructor(
    dataDir: string,
    private readonly maxBytes: number,
  ) {
    this.dir = path.join(dataDir, 'audit-spool');
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.chain.then(fn, fn);
    // The caller gets the failure through `next`; the chain only keeps the order.
    this.chain = next.then(
      () => undefined,
      () => undefined,
    );
    return next;
  }

  /** Appends the batch and fsyncs it: once this resolves, the events survive a crash of the process or machine. */
  append(events: AuditEvent[]): Promise<void> {
    return this.serial(async () => {
      const text = events.map((e) => JSON.stringify(e)).join('\n') + '\n';
      const bytes = Buffer.byteLength(text);
      if (this.bytesOnDisk + bytes > this.maxBytes) throw new SpoolFullError();
      if (!this.active) {
        const file = path.join(this.dir, `spool-${process.pid}-${this.instance}-${++this.sequence}.open`);
        const handle = await open(file, 'a', 0o600);
        this.active = { handle, path: file, bytes: 0 };
        await syncDirectory(this.dir); // the new name itself must survive a crash
      }
      const { handle } = this.active;
      await handle.write(text);
      await handle.datasync();
      this.active.bytes += bytes;
      this.bytesOnDisk += bytes;
      this.depth += events.length;
    });
  }

  /** Stops appending to the current segment: it becomes drainable. The next append starts a new one. */
  seal(): Promise<void> {
    return this.serial(async () => {
      if (!this.active) return;
      const { handle, path: file } = this.active;
      this.active = undefined;
      await handle.close();
      renameSync(file, file.replace(/\.open$/, '.ready'));
    });
  }

  /**
   * Segments this process may drain now: its own sealed ones, and every segment of a process that is
   * gone (claimed by renaming it to one of our names).
   */
  claimDrainable(): SpoolSegment[] {
    const out: SpoolSegment[] = [];
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return out;
    }
    for (const name of names.sort()) {
      const m = NAME.exec(name);
      if (!m) continue;
      const [, pid, instance, , state] = m;
      const mine = Number(pid) === process.pid && instance === this.instance;
      if (mine) {
        if (state === 'ready') out.push({ path: path.join(this.dir, name), claimed: false });
        continue;
      }
      // A live process (another cluster worker) drains its own segments.
      if (Number(pid) !== process.pid && processAlive(Number(pid))) continue;
      const claimed = path.join(this.dir, `spool-${process.pid}-${this.instance}-${++this.sequence}.ready`);
      try {
        renameSync(path.join(this.dir, name), claimed);
      } catch {
        continue; // another process claimed it first
      }
      try {
        const size = statSync(claimed).size;
        this.bytesOnDisk += size;
      } catch {
        // gone already
      }
      out.push({ path: claimed, claimed: true });
    }
    return out;
  }

  /** The events of a segment. A torn last line (a crash during a write never acknowledged) is skipped. */
  async read(segment: SpoolSegment): Promise<AuditEvent[]> {
    const text = await readFile(segment.path, 'utf8');
    const events: AuditEvent[] = [];
    for (const line of text.split('\n')) {
      if (!line) continue;
      try {
        events.push(JSON.parse(line) as AuditEvent);
      } catch {
        // torn write: it was never fsync'd-and-acknowledged, so no client holds its token
      }
    }
    return events;
  }

  /** The segment is in Postgres: delete it. */
  async remove(segment: SpoolSegment, events: number): Promise<void> {
    let size = 0;
    try {
      size = statSync(segment.path).size;
    } catch {
      // already gone
    }
    try {
      await unlink(segment.path);
    } catch (error) {
      // Gone already is the goal; anything else stays (its events are committed: a re-drain is idempotent).
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    this.bytesOnDisk = Math.max(0, this.bytesOnDisk - size);
    this.depth = Math.max(0, this.depth - events);
  }

  /** Where events Postgres refused for themselves (a damaged line) are kept for the operator. */
  get rejectedPath(): string {
    return path.join(this.dir, 'rejected.jsonl');
  }

  /**
   * Keeps events Postgres refused for themselves (never drained again automatically): appended and
   * fsync'd before the segment that held them may be removed.
   */
  reject(events: AuditEvent[]): Promise<void> {
    return this.serial(async () => {
      const handle = await open(this.rejectedPath, 'a', 0o600);
      try {
        await handle.write(events.map((e) => JSON.stringify(e)).join('\n') + '\n');
        await handle.datasync();
      } finally {
        await handle.close();
      }
      await syncDirectory(this.dir);
    });
  }

  /** Events counted in a claimed segment (for the depth gauge). */
  counted(events: number): void {
    this.depth += events;
  }

  async close(): Promise<void> {
    await this.serial(async () => {
      await this.active?.handle.close();
    });
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } catch {
    // some filesystems refuse fsync on a directory; the data itself is synced
  } finally {
    await handle.close();
  }
}
