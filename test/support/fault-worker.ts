// Test-only crypto worker: the real one plus fault injection, for reliability-workers.test.ts. It is never
// part of what ships (compiled to dist/test, which the image leaves out): the test harness loads it in
// place of workers/crypto-worker.js through a module hook (fault-hooks.ts), with `faultWorker: true`.
// The secret "fault:crash" ends the argon2 thread, "fault:hang" wedges it forever, "fault:slow" holds it
// for four seconds (room for a test on a busy machine to act while it runs) and then verifies as usual
// (a wrong secret).
// With FAULT_VERIFY_DELAY_MS, every verification first notes its start in FAULT_VERIFY_STARTED_FILE (one
// line each), then waits that long: a test can change an agent while its check is known to be running.
// With FAULT_WORKER_LOAD_DELAY_MS, each thread spends that long evaluating this module (a cold image on a
// contended node): a task deadline must never terminate a thread that is still loading it.
import { appendFileSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import * as real from '../../workers/crypto-worker.js';

export * from '../../workers/crypto-worker.js';

const loadDelayMs = Number(process.env.FAULT_WORKER_LOAD_DELAY_MS ?? 0);
if (loadDelayMs > 0 && !isMainThread) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, loadDelayMs);

export function verifySecret(task: real.VerifyTask): number {
  if (task.secret === 'fault:crash') process.exit(1); // in a worker thread this ends the thread only
  if (task.secret === 'fault:hang') Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); // forever
  if (task.secret === 'fault:slow') Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 4000);
  const delayMs = Number(process.env.FAULT_VERIFY_DELAY_MS ?? 0);
  if (delayMs > 0) {
    if (process.env.FAULT_VERIFY_STARTED_FILE) appendFileSync(process.env.FAULT_VERIFY_STARTED_FILE, 'started\n');
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, delayMs);
  }
  return real.verifySecret(task);
}
