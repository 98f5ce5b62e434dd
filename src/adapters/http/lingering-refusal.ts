// A 413 for a body refused while it streams in, sent when it can reach the client.

export interface LingeringRefusalOptions {
  /** Sends the 413. */
  readonly answer: () => void;
  /** The exchange has ended already (aborted, or answered otherwise): nothing is sent. */
  readonly finished: () => boolean;
}

/**
 * A body refused mid-stream (413) is answered once the client has stopped sending: at the body's end,
 * after a short quiet spell, or at a hard bound (bytes or time) for a client that never stops. uWS closes
 * the connection right after the answer, and closing a socket with unread bytes sends a reset instead of
 * a FIN; a client still writing then fails on EPIPE/ECONNRESET before it reads the 413 ("lingering close",
 * RFC 9112 §9.6). uWS offers no way to close the connection after a finished answer, so we answer late.
 */
export class LingeringRefusal {
  static readonly QUIET_MS = 150;
  static readonly MAX_MS = 3000;
  static readonly MAX_DISCARDED_BYTES = 4 * 1024 * 1024;
  private discarded = 0;
  private readonly quiet: NodeJS.Timeout;
  private readonly deadline: NodeJS.Timeout;
  private answered = false;

  constructor(private readonly options: LingeringRefusalOptions) {
    this.quiet = setTimeout(() => this.answerNow(), LingeringRefusal.QUIET_MS);
    this.deadline = setTimeout(() => this.answerNow(), LingeringRefusal.MAX_MS);
  }

  /** Called with each chunk uWS hands over after the refusal (the chunk itself is dropped). */
  received(bytes: number, isLast: boolean): void {
    this.discarded += bytes;
    if (isLast || this.discarded > LingeringRefusal.MAX_DISCARDED_BYTES) this.answerNow();
    else this.quiet.refresh();
  }

  private answerNow(): void {
    if (this.answered) return;
    this.answered = true;
    clearTimeout(this.quiet);
    clearTimeout(this.deadline);
    if (!this.options.finished()) this.options.answer();
  }
}
