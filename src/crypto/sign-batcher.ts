// Adaptive batching of sign tasks. At most one batch per signing thread is in flight; requests that
// arrive while every thread is busy wait here and leave together in the next batch. An idle service
// therefore signs each token at once, and a loaded one pays the cross-thread message cost once per
// batch instead of once per token.
import { unavailable } from '../errors/catalog.js';
import { NEED_KEY, type SignTask } from '../../workers/sign-protocol.js';

interface Pending {
  task: SignTask;
  privateKeyPem: string;
  signal?: AbortSignal;
  resolve: (token: string) => void;
  reject: (error: unknown) => void;
}

export type RunBatch = (batch: SignTask[]) => Promise<string[]>;


export class SignBatcher {
  private readonly pending: Pending[] = [];
  private inFlight = 0;

  constructor(
    private readonly runBatch: RunBatch,
    private readonly threads: number,
    private readonly maxPending: number,
    private readonly maxBatch = 32,
  ) {}

  get queued(): number {
    return this.pending.length;
  }

  sign(kid: string, privateKeyPem: string, payload: string, signal?: AbortSignal): Promise<string> {
    if (this.pending.length >= this.maxPending) return Promise.reject(unavailable(1, 'The service is busy; retry shortly.'));
    return new Promise((resolve, reject) => {
      this.pending.push({ task: { kid, payload }, privateKeyPem, signal, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.threads && this.pending.length > 0) {
      // Share what waits evenly among the free threads, so both cores work on a burst.
      const free = this.threads - this.inFlight;
      const size = Math.min(this.maxBatch, Math.ceil(this.pending.length / free));
      const batch = this.pending.splice(0, size).filter((p) => !p.signal?.aborted);
      if (batch.length === 0) continue;
      this.inFlight++;
      void this.dispatch(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async dispatch(batch: Pending[]): Promise<void> {
    try {
      let tokens = await this.runBatch(batch.map((p) => p.task));
      const missing = batch.filter((_, i) => tokens[i] === NEED_KEY);
      if (missing.length > 0) {
        // This thread has not seen these keys yet: once per thread and key.
        const retried = await this.runBatch(missing.map((p) => ({ ...p.task, privateKeyPem: p.privateKeyPem })));
        let j = 0;
        tokens = tokens.map((t) => (t === NEED_KEY ? retried[j++] : t));
      }
      batch.forEach((p, i) => p.resolve(tokens[i]));
    } catch (error) {
      for (const p of batch) p.reject(error);
    }
  }
}
