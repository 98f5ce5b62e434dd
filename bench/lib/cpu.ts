// CPU time from /proc (utime + stime, in clock ticks of 10 ms on Linux): of a process, of each thread of a
// process, and the Postgres backends serving a database. CPU per request is the figure a busy machine
// swings least (throughput swings with the neighbours' load).
import { readdirSync, readFileSync } from 'node:fs';
import postgres from 'postgres';

const TICKS_PER_SECOND = 100;

/** utime + stime of the process or thread whose stat file this is, in seconds (0 once it is gone). */
function statSeconds(statPath: string): number {
  try {
    const fields = readFileSync(statPath, 'utf8').replace(/^.*\) /, '').split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

export function cpuSeconds(pid: number): number {
  return statSeconds(`/proc/${pid}/stat`);
}

/** CPU seconds of each thread of `pid`, by thread id. */
export function threadCpuSeconds(pid: number): Map<number, number> {
  const threads = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) threads.set(Number(tid), statSeconds(`/proc/${pid}/task/${tid}/stat`));
  return threads;
}

/** The Postgres backends connected to the database of `databaseUrl` (this query's own excepted). */
export async function databaseBackendPids(databaseUrl: string): Promise<number[]> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    return (await sql`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).map((r) => r.pid as number);
  } finally {
    await sql.end();
  }
}
