// Piscina worker: the only place where argon2id and RS256 run, so the HTTP thread never blocks on crypto.
// Each export is a task, selected with `pool.run(task, { name })`.
import { threadId } from 'node:worker_threads';
import { hashSync, verifySync } from '@node-rs/argon2';
import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import { Piscina } from 'piscina';
import { ARGON2_OPTIONS } from './argon2-params.js';
import { NEED_KEY, packTokens, type SignTask } from './sign-protocol.js';

export interface VerifyTask {
  /**
   * Candidate hashes: the one the secret's hint points at, or a decoy (two only for hashes older than
   * hints). Every one is verified, without stopping at a match.
   */
  hashes: string[];
  secret: string;
}

/** Index of the first matching hash, or -1. Verifies every hash, without stopping at a match (timing). */
// argon2 runs synchronously on this pool thread (not on libuv's thread pool): the argon2 pool's size is
// then exactly the argon2 parallelism, and a flood of cold credentials never queues in front of
// signatures (they run on the signing pool's own threads).
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

const keys = new Map<string, KeyObject>();
/** base64url of the protected header, per typ and kid: the same few bytes on every token. */
const headers = new Map<string, string>();

function encodedHeader(kid: string, typ: string): string {
  const name = `${typ} ${kid}`;
  let header = headers.get(name);
  if (header === undefined) {
    // The member order jose's CompactSign wrote ({alg, typ, kid}): tokens keep their exact shape.
    header = Buffer.from(JSON.stringify({ alg: 'RS256', typ, kid })).toString('base64url');
    if (headers.size > 64) headers.clear();
    headers.set(name, header);
  }
  return header;
}

// One signature, RS256 (RSASSA-PKCS1-v1_5, SHA-256) with node:crypto on this thread: no second hop to
// libuv's pool as WebCrypto made, no promise per token.
function signToken(task: SignTask): string {
  let key = keys.get(task.kid);
  if (!key) {
    // Keeping keys here (imported once) spares every task a copy of the PEM across threads.
    if (!task.privateKeyPem) return NEED_KEY;
    key = createPrivateKey(task.privateKeyPem);
    if (key.asymmetricKeyType !== 'rsa') throw new TypeError(`signing key ${task.kid} is not an RSA key`);
    if (keys.size > 16) keys.clear(); // only a handful of keys are ever live
    keys.set(task.kid, key);
  }
  const input = `${encodedHeader(task.kid, task.typ ?? 'JWT')}.${Buffer.from(task.payload).toString('base64url')}`;
  return `${input}.${sign('sha256', Buffer.from(input, 'latin1'), key).toString('base64url')}`;
}

/**
 * Signs a batch (one cross-thread message for many tokens under load), answered as one transferred
 * buffer (packTokens). Each entry is a token, or NEED_KEY when this thread lacks that entry's key (the
 * caller resends those entries with the PEM).
 */
export function signTokens(batch: SignTask[]): unknown {
  return Piscina.move(packTokens(batch.map(signToken)));
}

/** Readiness probe: answers only if the thread is alive and not wedged. */
export function ping(): string {
  return 'pong';
}

/** Start-up: which thread answered (each thread must have loaded this module before any deadline applies). */
export function loaded(): number {
  return threadId;
}
