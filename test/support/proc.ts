// Process helpers for the harness, read from /proc (Linux).
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
    // gone, or no children file
  }
  return out;
}
