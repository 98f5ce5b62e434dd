// Processes the tests and the bench start or watch, read from /proc (Linux).
import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** Direct children of a process; empty when it is gone. */
export function childrenOf(pid: number): number[] {
  const out: number[] = [];
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
      if (text) out.push(...text.split(/\s+/).map(Number));
    }
  } catch {
    // The process is gone (or exits while its tasks are read): it has no children to report.
  }
  return out;
}

/** A process and all its descendants (e.g. a cluster primary and its workers), parents first. */
export function processTree(pid: number): number[] {
  const out: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const next = queue.shift()!;
    out.push(next);
    queue.push(...childrenOf(next));
  }
  return out;
}

/** A memory field of /proc/<pid>/status in bytes (VmRSS: resident now, VmHWM: its peak); 0 when gone. */
export function memoryBytes(pid: number, field: 'VmRSS' | 'VmHWM' = 'VmRSS'): number {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return 0; // the process is gone: it holds no memory
  }
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  return match ? Number(match[1]) * 1024 : 0;
}

/** Whether the child has exited or was killed. */
export function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/**
 * Sends `signal` (default SIGTERM) unless the child is already gone, SIGKILL after `killAfterMs` if it is
 * still there, and resolves once it has exited.
 */
export async function stopProcess(child: ChildProcess, options: { signal?: NodeJS.Signals; killAfterMs?: number } = {}): Promise<void> {
  if (hasExited(child)) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(options.signal ?? 'SIGTERM');
  const timer = options.killAfterMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), options.killAfterMs);
  await exited;
  clearTimeout(timer);
}
