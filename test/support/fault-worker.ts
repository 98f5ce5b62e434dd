// Test-only crypto worker: the real one plus fault injection, for reliability-workers.test.ts. It is never
// part of what ships (compiled to dist/test, which the image leaves out): the test harness loads it in
// place of workers/crypto-worker.js through a module hook (fault-hooks.ts), with `faultWorker: true`.
// The secret "fault:crash" ends the argon2 thread, "fault:hang" wedges it forever, "fault:slow" holds it
// for a second and then verifies as usual (a wrong secret).
import * as real from '../../workers/crypto-worker.js';

export * from '../../workers/crypto-worker.js';

export function verifySecret(task: real.VerifyTask): number {
  if (task.secret === 'fault:crash') process.exit(1); // in a worker thread this ends the thread only
  if (task.secret === 'fault:hang') Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); // forever
  if (task.secret === 'fault:slow') Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
  return real.verifySecret(task);
}
