// Single use of an assertion's jti over two records: the durable one (Postgres: survives a Redis that
// restarts empty, is flushed or fails over asynchronously) and the shared fast one (Redis: answers
// while Postgres is away). Both are asked at once. Seen in either: a replay. First use needs one answer:
// a key agent is served while either store is down, and a replay is refused unless both lost it (an
// assertion used while Postgres was away, then Redis emptied before it expired). Neither answering: 503.
// Concurrent first uses of one assertion may each win a different record and all be refused: never two
// tokens for one assertion, maybe none for a client that raced itself (test/support/replay-guard-conformance.ts).
import type { ReplayGuard } from '../ports/assertions.js';

export interface EitherRecordOptions {
  durable: ReplayGuard;
  fast: ReplayGuard;
}

export class EitherRecordReplayGuard implements ReplayGuard {
  private readonly durable: ReplayGuard;
  private readonly fast: ReplayGuard;

  constructor({ durable, fast }: EitherRecordOptions) {
    this.durable = durable;
    this.fast = fast;
  }

  async firstUse(id: string, rememberUntilMs: number): Promise<boolean> {
    const [durable, fast] = await Promise.allSettled([this.durable.firstUse(id, rememberUntilMs), this.fast.firstUse(id, rememberUntilMs)]);
    const answers = [durable, fast].filter((r): r is PromiseFulfilledResult<boolean> => r.status === 'fulfilled');
    // Both failed: the durable record's error (a StoreUnavailableError) is the answer, a 503.
    if (answers.length === 0) throw (durable as PromiseRejectedResult).reason;
    return answers.every((r) => r.value);
  }
}
