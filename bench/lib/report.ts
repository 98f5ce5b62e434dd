// Result shapes and the printed tables (targets and verdicts: checks.ts, stats.ts).
import os from 'node:os';
import type { LoadResult } from './load.js';

export interface Measurement extends LoadResult {
  name: string;
  note?: string;
  /** argon2 tasks the service ran during the measured part (from /metrics); warm should be ~0, cold ~1 per request. */
  argon2Verifications?: number;
  /** The figure is not valid (e.g. the pool of cold agents ran out); left out of medians and ratios. */
  invalid?: boolean;
}

export function machineInfo() {
  const cpus = os.cpus();
  return {
    cores: Math.max(1, os.availableParallelism?.() ?? cpus.length),
    cpu_model: cpus[0]?.model ?? 'unknown',
    cpu_mhz: cpus[0]?.speed ?? null,
    memory_mib: Math.round(os.totalmem() / 2 ** 20),
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    date: new Date().toISOString(),
    /** 1-minute load average when the run started: other work on the machine lowers every figure. */
    loadavg_at_start: Number(os.loadavg()[0].toFixed(2)),
  };
}

const fmt = (n: number | null | undefined, digits = 0) =>
  n === null || n === undefined || Number.isNaN(n) ? '-' : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
export const mib = (bytes: number) => bytes / 2 ** 20;

export function table(rows: (string | number)[][], header: string[]): string {
  const all = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  // Numbers right-aligned; the first (name) and a last "note" column left-aligned.
  const left = (i: number) => i === 0 || (i === header.length - 1 && /note|value/.test(header[i]) && i > 1);
  const line = (r: string[]) => r.map((c, i) => (left(i) ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ').trimEnd();
  return [line(all[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...all.slice(1).map(line)].join('\n');
}

export { fmt };
