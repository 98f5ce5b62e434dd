// Piscina worker: the only place where argon2id and RS256 run, so the HTTP thread never blocks on crypto.
// Each export is a task, selected with `pool.run(task, { name })`.
import { hash, verify } from '@node-rs/argon2';
import { importPKCS8, CompactSign } from 'jose';
import { ARGON2_OPTIONS } from './argon2-params.js';

export interface VerifyTask {
  /** Candidate hashes (current and, during a grace period, previous); the first match wins. */
  hashes: string[];
  secret: string;
}

/** Index of the matching hash, or -1. Always runs at least one verification (the caller passes a decoy). */
export async function verifySecret(task: VerifyTask): Promise<number> {
  if (FAULTS) injectFault(task.secret);
  for (let i = 0; i < task.hashes.length; i++) {
    try {
      if (await verify(task.hashes[i], task.secret)) return i;
    } catch {
      // A malformed stored hash counts as a mismatch, never as a crash of the worker.
    }
  }
  return -1;
}

// Fault injection for the reliability tests only: enabled by ACE_FAULT_INJECTION=on, never by default.
// The secret "fault:crash" kills this worker thread, "fault:hang" wedges it.
const FAULTS = process.env.ACE_FAULT_INJECTION === 'on';
function injectFault(secret: string): void {
  if (secret === 'fault:crash') process.exit(1); // in a worker thread this ends the thread only
  if (secret === 'fault:hang') Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); // forever
}

export async function hashSecret(secret: string): Promise<string> {
  return hash(secret, ARGON2_OPTIONS);
}

export interface SignTask {
  kid: string;
  /** PKCS#8 PEM of the private key; imported once per worker and kept by kid. */
  privateKeyPem: string;
  /** The JWT payload, already serialised by the caller. */
  payload: string;
}

const keys = new Map<string, Awaited<ReturnType<typeof importPKCS8>>>();
const encoder = new TextEncoder();

export async function signToken(task: SignTask): Promise<string> {
  let key = keys.get(task.kid);
  if (!key) {
    key = await importPKCS8(task.privateKeyPem, "RS256");
    if (keys.size > 16) keys.clear(); // only a handful of keys are ever live
    keys.set(task.kid, key);
  }
  return new CompactSign(encoder.encode(task.payload))
    .setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid: task.kid })
    .sign(key);
}

/** Readiness probe: answers only if the thread is alive and not wedged. */
export function ping(): string {
  return 'pong';
}
