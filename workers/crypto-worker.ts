// Piscina worker: the only place where argon2id and RS256 run, so the HTTP thread never blocks on crypto.
// Each export is a task, selected with `pool.run(task, { name })`.
import { threadId } from 'node:worker_threads';
import { hashSync, verifySync } from '@node-rs/argon2';
import { importPKCS8, CompactSign } from 'jose';
import { ARGON2_OPTIONS } from './argon2-params.js';
import { NEED_KEY, type SignTask } from './sign-protocol.js';

export interface VerifyTask {
  /**
   * Candidate hashes: the one the secret's hint points at, or a decoy (two only for hashes older than
   * hints). Every one is verified, without stopping at a match.
   */
  hashes: string[];
  secret: string;
}

/** Index of the first matching hash, or -1. Verifies every hash, without stopping at a match (timing). */
// argon2 runs synchronously on this pool thread (not on libuv's thread pool, where WebCrypto signs):
// the argon2 pool's size is then exactly the argon2 parallelism, and a flood of cold credentials can
// never queue in front of signatures.
export function verifySecret(task: VerifyTask): number {
  let matched = -1;
  for (let i = 0; i < task.hashes.length; i++) {
    let ok = false;
    try {
      ok = verifySync(task.hashes[i], task.secret);
    } catch {
      // A malformed stored hash counts as a mismatch, never as a crash of the worker.
    }
    if (ok && matched < 0) matched = i;
  }
  return matched;
}

export interface HashTask {
  secret: string;
  /** Chosen by the caller: it carries the secret's hint (src/core/credentials/secret-hint.ts). */
  salt: Uint8Array;
}

export function hashSecret(task: HashTask): string {
  return hashSync(task.secret, { ...ARGON2_OPTIONS, salt: task.salt });
}

const keys = new Map<string, Awaited<ReturnType<typeof importPKCS8>>>();
const encoder = new TextEncoder();

// One signature; the task itself is signTokens (a batch).
async function signToken(task: SignTask): Promise<string> {
  let key = keys.get(task.kid);
  if (!key) {
    // Keeping keys here (imported once) spares every task a copy of the PEM across threads.
    if (!task.privateKeyPem) return NEED_KEY;
    key = await importPKCS8(task.privateKeyPem, 'RS256');
    if (keys.size > 16) keys.clear(); // only a handful of keys are ever live
    keys.set(task.kid, key);
  }
  return new CompactSign(encoder.encode(task.payload))
    .setProtectedHeader({ alg: 'RS256', typ: task.typ ?? 'JWT', kid: task.kid })
    .sign(key);
}

/**
 * Signs a batch (one cross-thread message for many tokens under load). Each entry is a token, or
 * NEED_KEY when this thread lacks that entry's key (the caller resends those entries with the PEM).
 */
export async function signTokens(batch: SignTask[]): Promise<string[]> {
  // jose signs through WebCrypto, which runs each RSA operation on libuv's thread pool: start them all
  // at once so the pool keeps every core busy instead of waiting on one signature at a time.
  return Promise.all(batch.map(signToken));
}

/** Readiness probe: answers only if the thread is alive and not wedged. */
export function ping(): string {
  return 'pong';
}

/** Start-up: which thread answered (each thread must have loaded this module before any deadline applies). */
export function loaded(): number {
  return threadId;
}
