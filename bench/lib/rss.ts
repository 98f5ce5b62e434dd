// Peak resident memory of a process tree (the service's primary and its node:cluster workers).
// VmRSS is sampled from /proc every 250 ms and summed over the tree; VmHWM (each process's own peak)
// is summed as an upper bound. Children are looked up with `ps --ppid` every 2 s, not every sample.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

function statusKb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
    return match ? Number(match[1]) : 0;
  } catch {
    return 0; // the process is gone
  }
}

export function childPids(pid: number): number[] {
  try {
    return execFileSync('ps', ['--ppid', String(pid), '-o', 'pid='], { encoding: 'utf8' })
      .split('\n')
      .map((s) => Number(s.trim()))
      .filter((n) => n > 0);
  } catch {
    return []; // ps exits 1 when there is no child
  }
}

export class RssSampler {
  private pids: number[];
  private timer: NodeJS.Timeout | undefined;
  private childTimer: NodeJS.Timeout | undefined;
  /** Highest summed VmRSS seen since start (bytes). */
  peak = 0;
  /** Highest summed VmRSS since the last `mark()` (bytes). */
  windowPeak = 0;
  /** Largest summed VmHWM seen (bytes); an upper bound of the true peak. */
  hwm = 0;

  constructor(private readonly rootPid: number) {
    this.pids = [rootPid, ...childPids(rootPid)];
  }

  start(): this {
    this.timer = setInterval(() => this.sample(), 250);
    this.childTimer = setInterval(() => (this.pids = [this.rootPid, ...childPids(this.rootPid)]), 2000);
    this.timer.unref();
    this.childTimer.unref();
    this.sample();
    return this;
  }

  processCount(): number {
    return this.pids.length;
  }

  sample(): void {
    let rss = 0;
    let hwm = 0;
    for (const pid of this.pids) {
      rss += statusKb(pid, 'VmRSS');
      hwm += statusKb(pid, 'VmHWM');
    }
    rss *= 1024;
    hwm *= 1024;
    if (rss > this.peak) this.peak = rss;
    if (rss > this.windowPeak) this.windowPeak = rss;
    if (hwm > this.hwm) this.hwm = hwm;
  }

  /** Starts a new window for `windowPeak` (per-measurement peaks). */
  mark(): void {
    this.windowPeak = 0;
    this.sample();
  }

  stop(): void {
    this.sample();
    clearInterval(this.timer);
    clearInterval(this.childTimer);
  }
}
