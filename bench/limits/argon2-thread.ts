// Worker thread of argon2-rate.ts: verifies one hash in a loop for `seconds`, reports the count.
import { parentPort, workerData } from 'node:worker_threads';
import { verifySync } from '@node-rs/argon2';

const { hash, password, seconds } = workerData as { hash: string; password: string; seconds: number };
const started = performance.now();
const deadline = started + seconds * 1000;
let count = 0;
while (performance.now() < deadline) {
  if (!verifySync(hash, password)) throw new Error('argon2 verification failed');
  count++;
}
parentPort!.postMessage({ count, ms: performance.now() - started });
