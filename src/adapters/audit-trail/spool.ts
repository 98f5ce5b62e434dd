// The local spool: where audit events go while Postgres cannot take them. Append-only JSON-lines files
// in DATA_DIR/audit-spool, one batch per write, fsync'd before the batch's requests are answered.
//
// A batch is acknowledged only when every byte of it is written (a short write, as on a disk that fills
// up mid-batch, is continued until it completes or fails) and datasync'd. A batch that fails is cut off
// the file again (ftruncate to the last acknowledged byte), so no acknowledged line is ever glued to a
// torn one; if even that fails, the segment is sealed as it is and the next batch starts a new one.
// The depth gauge is kept per segment file and a count leaves with its file, so it cannot outlive what
// is on disk.
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

interface SegmentCount {
  events: number;
  bytes: number;
}

export interface SpoolOptions {
  /** DATA_DIR: the segments go to its audit-spool folder. */
  dataDir: string;
  /** AUDIT_SPOOL_MAX_BYTES: past it an append is refused (SpoolFullError). */
  maxBytes: number;
}

export class Spool {
  readonly dir: string;
  private readonly instance = randomBytes(4).toString('hex');
  private sequence = 0;
  private active: { handle: FileHandle; path: string } | undefined;
  /** Appends and seals run one at a time, in order. */
  private chain: Promise<unknown> = Promise.resolve();
  /** Acknowledged events and bytes of every segment file this process appends to, sealed or claimed. */
  private readonly segments = new Map<string, SegmentCount>();

  private readonly maxBytes: number;

  constructor({ dataDir, maxBytes }: SpoolOptions) {
    this.maxBytes = maxBytes;
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

  /** Events in spool files not yet drained (this process's files and the ones it claimed). */
  get depth(): number {
    let events = 0;
    for (const count of this.segments.values()) events += count.events;
    return events;
  }

  private get bytesOnDisk(): number {
    let bytes = 0;
    for (const count of this.segments.values()) bytes += count.bytes;
    return bytes;
  }

  /**
   * Appends the batch and datasyncs it: once this resolves, every byte of it survives a crash of the
   * process or machine. When it rejects, none of the batch counts as spooled.
   */
  append(events: AuditEvent[]): Promise<void> {
    return this.serial(async () => {
      const data = Buffer.from(events.map((e) => JSON.stringify(e)).join('\n') + '\n');
      if (this.bytesOnDisk + data.length > this.maxBytes) throw new SpoolFullError();
      if (!this.active) {
        const file = path.join(this.dir, `spool-${process.pid}-${this.instance}-${++this.sequence}.open`);
        const handle = await open(file, 'wx', 0o600);
        this.active = { handle, path: file };
        this.segments.set(file, { events: 0, bytes: 0 });
        try {
          await syncDirectory(this.dir); // the new name itself must survive a crash
        } catch (error) {
          await this.retireActive();
          throw error;
        }
      }
      const { handle, path: file } = this.active;
      const count = this.segments.get(file)!;
      try {
        await writeAll(handle, data, count.bytes);
        await handle.datasync();
      } catch (error) {
        await this.cutBack(handle, count.bytes);
        throw error;
      }
      count.bytes += data.length;
      count.events += events.length;
    });
  }

  /** After a failed batch: the file back to its acknowledged bytes, or (failing that) no more appends to it. */
  private async cutBack(handle: FileHandle, acknowledged: number): Promise<void> {
    try {
      await handle.truncate(acknowledged);
      await handle.datasync();
    } catch {
      // The torn tail stays, as the last line of a segment nothing appends to any more: the reader skips it.
      await this.retireActive();
    }
  }

  /** Closes the active segment and marks it drainable, whatever state its tail is in. */
  private async retireActive(): Promise<void> {
    if (!this.active) return;
    const { handle, path: file } = this.active;
    this.active = undefined;
    await handle.close().catch(() => undefined); // a close error leaves nothing to undo: the fd is released either way
    const ready = file.replace(/\.open$/, '.ready');
    renameSync(file, ready);
    this.move(file, ready);
  }

  private move(from: string, to: string): void {
    const count = this.segments.get(from);
    if (!count) return;
    this.segments.delete(from);
    this.segments.set(to, count);
  }

  /** Stops appending to the current segment: it becomes drainable. The next append starts a new one. */
  seal(): Promise<void> {
    return this.serial(async () => {
      if (!this.active) return;
      const { handle, path: file } = this.active;
      this.active = undefined;
      await handle.close();
      const ready = file.replace(/\.open$/, '.ready');
      renameSync(file, ready);
      this.move(file, ready);
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
    // The gauge follows the directory: a segment gone from it (deleted by hand, say) counts no more.
    const present = new Set(names.map((name) => path.join(this.dir, name)));
    for (const file of this.segments.keys()) if (!present.has(file) && file !== this.active?.path) this.segments.delete(file);
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
      let bytes = 0;
      try {
        bytes = statSync(claimed).size;
      } catch {
        // gone already
      }
      this.segments.set(claimed, { events: 0, bytes });
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

  /** The segment is in Postgres: delete it (and with it, its count). */
  async remove(segment: SpoolSegment): Promise<void> {
    try {
      await unlink(segment.path);
    } catch (error) {
      // Gone already is the goal; anything else stays (its events are committed: a re-drain is idempotent).
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    this.segments.delete(segment.path);
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
        const { size } = await handle.stat();
        const data = Buffer.from(events.map((e) => JSON.stringify(e)).join('\n') + '\n');
        try {
          await writeAll(handle, data, size);
          await handle.datasync();
        } catch (error) {
          // The call fails and the segment is kept, so these events are rejected again next round;
          // the cut keeps a torn line from swallowing the next one.
          await handle.truncate(size);
          throw error;
        }
      } finally {
        await handle.close();
      }
      await syncDirectory(this.dir);
    });
  }

  /** Events read from a claimed segment (for the depth gauge). */
  counted(segment: SpoolSegment, events: number): void {
    const count = this.segments.get(segment.path);
    if (count) count.events = events;
  }

  async close(): Promise<void> {
    await this.serial(async () => {
      await this.active?.handle.close();
    });
  }
}

/** Writes every byte at `position`, continuing short writes; a write that takes nothing throws. */
async function writeAll(handle: FileHandle, data: Buffer, position: number): Promise<void> {
  let done = 0;
  while (done < data.length) {
    const { bytesWritten } = await handle.write(data, done, data.length - done, position + done);
    if (bytesWritten <= 0) throw Object.assign(new Error('audit spool: the disk took no bytes'), { code: 'ENOSPC' });
    done += bytesWritten;
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
