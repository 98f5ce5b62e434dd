// The argon2 ceiling: argon2id verifications per second on all cores, one worker thread per core, each
// verifying in a loop with the service's own parameters. A cold token costs one verification, so this is
// the most the token endpoint could reach with credentials it has never seen.
import { Worker } from 'node:worker_threads';
import { hashSync } from '@node-rs/argon2';
import { randomBytes } from 'node:crypto';
import { loadArgon2Options, type Argon2Options } from './argon2-options.js';

export interface Argon2Rate {
  verifyPerSecond: number;
  threads: number;
  options: Argon2Options;
  optionsSource: string;
}

export async function argon2VerifyRate(threads: number, seconds: number): Promise<Argon2Rate> {
  const { options, source } = await loadArgon2Options();
  const password = randomBytes(32).toString('base64url');
  const hash = hashSync(password, options);
  const workerUrl = new URL('./argon2-thread.js', import.meta.url);
  const results = await Promise.all(
    Array.from({ length: threads }, () =>
      new Promise<{ count: number; ms: number }>((resolve, reject) => {
        const worker = new Worker(workerUrl, { workerData: { hash, password, seconds } });
        worker.once('message', resolve);
        worker.once('error', reject);
      }),
    ),
  );
  const verifyPerSecond = results.reduce((sum, r) => sum + (r.count * 1000) / r.ms, 0);
  return { verifyPerSecond, threads, options, optionsSource: source };
}
