// The revocation feed's poll half: RFC 8936 polls of the platform's feed from the sequence the receiver holds
// (acknowledging it), page after page, one at a time; every poll period unless the socket proves the copy
// current (feed-socket.ts), and at once (spaced) when a head shows a gap or a socket was lost. The SETs of
// an answer go to the receiver (revocation-feed.ts) in sequence order, the head last.
import { revocationJti, seqOfJti, type PollAnswer } from '@agent-credential-exchange/protocol/feed-document';
import type { RevocationRules } from './revocation-rules.js';

/** The feed refused our feed token (401): missing, wrong, deleted, or another platform's. */
export class FeedUnauthorizedError extends Error {
  readonly code = 'ERR_ACE_FEED_UNAUTHORIZED';
  constructor() {
    super('revocation feed refused the feed token (HTTP 401): check the feedToken option (a live feed credential of this platform)');
    this.name = 'FeedUnauthorizedError';
  }
}

/** Gap polls (a head lists SETs we lack) are at least this far apart: a proxy that strips them cannot make us spin. */
const GAP_POLL_SPACING_MS = 1000;

export interface FeedPollerOptions {
  /** …/revocations of the platform. */
  feedUrl: string;
  platformId: string;
  feedToken: string;
  fetch: typeof fetch;
  /** The poll's settings, as RevocationFeedOptions names them (documented there). */
  options: { timeoutMs?: number };
  pollMs: number;
  /** The receiver's copy: where a poll resumes, and whether its head shows a gap. */
  rules: Pick<RevocationRules, 'seq' | 'hasGap'>;
  /** One SET of an answer, to check and apply (a rejected one is counted by the receiver). */
  apply: (jws: string) => Promise<void>;
  /** The feed token was refused (401). */
  unauthorized: () => void;
  /** The period's poll is skipped while this holds (an open socket proved the copy current recently). */
  proven: () => boolean;
  warn: (message: string, detail?: Record<string, unknown>) => void;
  /** The receiver's counters (stats()). */
  counters: { pollFailures: number };
}

export class FeedPoller {
  /** The message of the last failed poll (cleared by a poll that succeeds). */
  lastPollError: string | undefined;
  private closed = false;
  private pollTimer: ReturnType<typeof setInterval> | undefined;
  private gapPollTimer: ReturnType<typeof setTimeout> | undefined;
  private lastGapPollAt = 0;
  private fetching: Promise<void> | undefined;
  private pollAgain: Promise<void> | undefined;
  private lastGapWarnAt = 0;
  private readonly options: { timeoutMs?: number };
  private readonly rules: Pick<RevocationRules, 'seq' | 'hasGap'>;
  private readonly counters: { pollFailures: number };
  private readonly pollMs: number;
  private readonly feedUrl: string;

  constructor(private readonly poll: FeedPollerOptions) {
    this.options = poll.options;
    this.rules = poll.rules;
    this.counters = poll.counters;
    this.pollMs = poll.pollMs;
    this.feedUrl = poll.feedUrl;
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.gapPollTimer);
    clearInterval(this.pollTimer);
  }

  /** A poll nobody waits for: a failure is counted in stats(); staleness (failMode) does the rest. */
  pollInBackground(): void {
    this.pollNow().then(
      () => (this.lastPollError = undefined),
      (error: unknown) => {
        this.counters.pollFailures++;
        this.lastPollError = (error as Error)?.message ?? String(error);
      },
    );
  }

  /** A head showed a gap: poll at once, but at most once per GAP_POLL_SPACING_MS while the gap lasts. */
  pollSoon(): void {
    if (this.closed || this.gapPollTimer) return;
    const wait = this.lastGapPollAt + GAP_POLL_SPACING_MS - Date.now();
    const poll = () => {
      this.gapPollTimer = undefined;
      this.lastGapPollAt = Date.now();
      this.pollInBackground();
    };
    if (wait <= 0) return poll();
    this.gapPollTimer = setTimeout(poll, wait);
    this.gapPollTimer.unref?.();
  }

  /**
   * RFC 8936 poll from our sequence (acknowledging it), page after page; one at a time. A poll that
   * starts while another runs waits for it and polls again, so a gap seen during a poll is not missed.
   */
  pollNow(): Promise<void> {
    if (this.fetching) {
      const again = () => {
        this.pollAgain = undefined;
        return this.pollNow();
      };
      this.pollAgain ??= this.fetching.then(again, again);
      return this.pollAgain;
    }
    this.fetching = (async () => {
      for (let page = 0; page < 100; page++) {
        const seq = this.rules.seq;
        const response = await this.poll.fetch(this.feedUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${this.poll.feedToken}` },
          body: JSON.stringify({ ack: seq > 0 ? [revocationJti(this.poll.platformId, seq)] : [], maxEvents: 1000, returnImmediately: true }),
          signal: AbortSignal.timeout(this.options.timeoutMs ?? 5000),
        });
        if (response.status === 401) {
          await response.body?.cancel();
          // Loud: the copy goes stale and failMode applies; never read as "no revocations".
          this.poll.unauthorized();
          throw new FeedUnauthorizedError();
        }
        if (response.status !== 200) {
          await response.body?.cancel();
          throw new Error(`revocation feed answered HTTP ${response.status}`);
        }
        const answer = (await response.json()) as PollAnswer;
        if (!answer || typeof answer.sets !== 'object' || answer.sets === null) throw new Error('revocation poll answer has no "sets"');
        // Revocations in sequence order, then the head (it proves freshness only once they are applied).
        const entries = Object.entries(answer.sets).map(([jti, jws]) => ({ seq: seqOfJti(jti, this.poll.platformId) ?? Infinity, jws }));
        entries.sort((a, b) => a.seq - b.seq);
        // A rejected SET is counted and warned about in applySet; the rest of the answer still applies.
        for (const { jws } of entries) await this.poll.apply(String(jws));
        if (!answer.moreAvailable) break;
      }
      if (this.rules.hasGap) this.warnGap();
    })().finally(() => {
      this.fetching = undefined;
    });
    return this.fetching;
  }

  /** A poll answer whose head lists SETs the answer lacked: something between us and the service drops them. */
  private warnGap(): void {
    const now = Date.now();
    if (now - this.lastGapWarnAt < 60_000) return;
    this.lastGapWarnAt = now;
    this.poll.warn('revocation feed: the signed head lists SETs the poll answer did not carry (a proxy dropping them?): the copy is not current and goes stale', {
      platform_id: this.poll.platformId,
      seq: this.rules.seq,
    });
  }

  /**
   * Every poll period: a poll, unless an open socket brought a head that proved the copy current within
   * the period (plus slack). So the feed is polled while the socket connects, backs off, is silent, or
   * carries only heads that show a gap.
   */
  startPolling(): void {
    if (this.pollTimer || this.closed) return;
    this.pollTimer = setInterval(() => {
      if (this.poll.proven()) return;
      this.pollInBackground();
    }, this.pollMs);
    this.pollTimer.unref?.();
  }
}
