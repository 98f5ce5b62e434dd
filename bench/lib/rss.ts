// Peak resident memory of a process tree (the service's primary and its node:cluster workers).
// VmRSS is sampled from /proc every 250 ms and summed over the tree; VmHWM (each process's own peak)
// is summed as an upper bound. Children are looked up in /proc every 2 s, not every sample.
import { childrenOf, memoryBytes } from '../../kit/proc.js';

export class RssSampler {
  private pids: number[];
  private timer: NodeJS.Timeout | undefined;
  private childTimer: NodeJS.Timeout | undefined;
  /** Summed VmRSS of the latest sample (bytes). */
  current = 0;
  /** Highest summed VmRSS seen since start (bytes). */
  peak = 0;
  /** Highest summed VmRSS since the last `mark()` (bytes). */
  windowPeak = 0;
  /** Largest summed VmHWM seen (bytes); an upper bound of the true peak. */
  hwm = 0;

  constructor(private readonly rootPid: number) {
    this.pids = [rootPid, ...childrenOf(rootPid)];
  }

  start(): this {
    this.timer = setInterval(() => this.sample(), 250);
    this.childTimer = setInterval(() => (this.pids = [this.rootPid, ...childrenOf(this.rootPid)]), 2000);
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
      rss += memoryBytes(pid, 'VmRSS');
      hwm += memoryBytes(pid, 'VmHWM');
    }
    this.current = rss;
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
