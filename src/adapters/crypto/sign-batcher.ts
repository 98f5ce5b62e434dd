// Adaptive batching of sign tasks. At most one batch per signing thread is in flight; requests that
// arrive while every thread is busy wait in the line and leave together in the next batch. An idle service
// therefore signs each token at once, and a loaded one pays the cross-thread message cost once per
// batch instead of once per token.
import { busy } from '../../core/errors.js';
import type { TokenType } from '../../core/ports/crypto.js';
import { NEED_KEY, type SignTask } from '../../../workers/sign-protocol.js';
import { WaitingLine } from './waiting-line.js';

interface Pending {
  task: SignTask;
  privateKeyPem: string;
}

export type RunBatch = (batch: SignTask[]) => Promise<string[]>;

export interface SignBatcherOptions {
  readonly runBatch: RunBatch;
  /** Signing threads: batches in flight at most. */
  threads: number;
  maxPending: number;
  /** 32 when absent. */
  maxBatch?: number;
  /** The refusal when `maxPending` wait already (the pools count it in their metrics); `busy()` when absent. */
  full?: () => unknown;
}

export class SignBatcher {
  private readonly line: WaitingLine<Pending, string>;
  private readonly runBatch: RunBatch;

  constructor({ runBatch, threads, maxPending, maxBatch = 32, full = () => busy() }: SignBatcherOptions) {
    this.runBatch = runBatch;
    this.line = new WaitingLine({ run: (batch) => this.dispatch(batch), slots: threads, maxWaiting: maxPending, full, maxBatch });
  }

  get queued(): number {
    return this.line.queued;
  }

  sign(kid: string, privateKeyPem: string, payload: string, signal?: AbortSignal, typ?: TokenType): Promise<string> {
    // The default typ (JWT) travels as an absent field: the common task stays as small as it was.
    const task: SignTask = typ === undefined || typ === 'JWT' ? { kid, payload } : { kid, payload, typ };
    return this.line.run({ task, privateKeyPem }, signal);
  }

  private async dispatch(batch: Pending[]): Promise<string[]> {
    const tokens = await this.runBatch(batch.map((p) => p.task));
    const missing = batch.filter((_, i) => tokens[i] === NEED_KEY);
    if (missing.length === 0) return tokens;
    // This thread has not seen these keys yet: once per thread and key.
    const retried = await this.runBatch(missing.map((p) => ({ ...p.task, privateKeyPem: p.privateKeyPem })));
    let j = 0;
    return tokens.map((t) => (t === NEED_KEY ? retried[j++] : t));
  }
}
