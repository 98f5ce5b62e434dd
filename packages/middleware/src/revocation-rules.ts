// The revocation rules of the middleware: what a verified feed SET changes, which tokens are refused, and
// whether the copy is proven current. Pure: no I/O, no timers; the clock is injected. The connection that
// brings the SETs (poll, socket) and checks their signatures is revocation-feed.ts.
//
// Completeness: the receiver's sequence advances over a number only when it holds that SET, or when a
// verified stream head says the number is no longer live (its entry expired, so did every token it took
// back). A head proves the copy current as of its `iat` only when every live sequence up to the head is
// held: a SET dropped in transit is a gap, never mistaken for an expired one.
import {
  EVENT_PLATFORM_TOKENS_REVOKED,
  EVENT_SESSION_REVOKED,
  EVENT_SIGNING_KEY_RETIRED,
  parseLiveRanges,
  type RevocationEventBody,
  type SetPayload,
} from '@agent-credential-exchange/protocol/feed-document';

/** A verified stream head: the last sequence, and the sequences the transmitter still serves. */
export interface StreamHead {
  seq: number;
  /**
   * Inclusive, ascending, disjoint, non-adjacent ranges of live sequences (all within 1..seq). Absent from a
   * transmitter of the previous release: such a head proves nothing purged.
   */
  live?: ReadonlyArray<readonly [number, number]>;
}

/**
 * Reads a stream-head event body; undefined when it is malformed (then the whole head is rejected, never
 * partly trusted): `seq` a safe integer >= 0, `live` absent or an array of [from, to] safe-integer pairs with
 * 1 <= from <= to <= seq, ascending, disjoint and not adjacent.
 */
export function readStreamHead(event: unknown): StreamHead | undefined {
  if (!event || typeof event !== 'object') return undefined;
  const { seq, live } = event as { seq?: unknown; live?: unknown };
  if (!Number.isSafeInteger(seq) || (seq as number) < 0) return undefined;
  if (live === undefined) return { seq: seq as number };
  const ranges = parseLiveRanges(live, seq as number);
  return ranges === undefined ? undefined : { seq: seq as number, live: ranges };
}

/**
 * - `ok`: accept; `ok-while-stale`: accept, although the copy is stale (failMode "open", within its bound);
 * - `revoked`: an entry or a void key takes the token back; `unavailable`: stale, refuse (503).
 */
export type RuleVerdict = 'ok' | 'ok-while-stale' | 'revoked' | 'unavailable';

/** `current`: the head proves the copy current as of its iat. `gap`: live SETs up to the head are missing. */
export type HeadOutcome = 'current' | 'gap';

export interface RevocationRulesOptions {
  issuer: string;
  clockToleranceSeconds: number;
  failMode: 'open' | 'closed';
  staleAfterMs: number;
  /** failMode "open": how long past staleAfterMs tokens are still accepted. */
  openForMs: number;
  /** ms since the epoch: entries' lifetimes and freshness. */
  now: () => number;
}

interface Cutoff {
  iatMax: number;
  expiresAt: number;
}

export class RevocationRules {
  /** Highest contiguous sequence: every number up to it is held or proven purged. The receiver acks it. */
  private contiguous = 0;
  /** Sequences held above `contiguous` (a gap below them): applied already, counted once the gap closes. */
  private readonly held = new Set<number>();
  /** The last verified head lists live sequences this copy lacks. */
  private gap = false;
  /** ms since the epoch: the copy is proven current as of then (0: never). */
  private lastContact = 0;
  private readonly agents = new Map<string, Cutoff>();
  private platform: Cutoff | undefined;
  private readonly kids = new Map<string, number>();
  private readonly createdAt: number;
  private refusedCount = 0;
  private acceptedWhileStaleCount = 0;

  constructor(private readonly options: RevocationRulesOptions) {
    this.createdAt = options.now();
  }

  get seq(): number {
    return this.contiguous;
  }

  /** ms since the epoch of the last proof of freshness (0: never). */
  get lastContactAt(): number {
    return this.lastContact;
  }

  get hasGap(): boolean {
    return this.gap;
  }

  get refused(): number {
    return this.refusedCount;
  }

  get acceptedWhileStale(): number {
    return this.acceptedWhileStaleCount;
  }

  get liveEntries(): number {
    return this.agents.size + this.kids.size + (this.platform ? 1 : 0);
  }

  /** A verified revocation SET of sequence `seq`: its events apply at once (twice, or early, changes nothing). */
  applyRevocation(seq: number, payload: SetPayload): void {
    // An event type we do not know is ignored, as SSF asks, but its SET still counts in the sequence.
    this.applyEvents(payload);
    if (seq <= this.contiguous) return;
    this.held.add(seq);
    this.advanceOverHeld();
  }

  /** A verified stream head signed at `iat` (seconds): advances over what it proves purged, then judges freshness. */
  applyHead(head: StreamHead, iat: number): HeadOutcome {
    if (head.live) this.advanceOverPurged(head.seq, head.live);
    if (this.contiguous < head.seq) {
      // Live SETs up to the head are missing (or, from a head without `live`, possibly purged: unknowable).
      this.gap = true;
      return 'gap';
    }
    this.gap = false;
    // Current as of the head's signing time (never later than now: a service clock ahead proves nothing more).
    this.lastContact = Math.max(this.lastContact, Math.min(this.options.now(), (iat + 1) * 1000));
    return 'current';
  }

  /** A void kid (retired key): refused (and counted) before the token's signature is even checked. */
  refuseVoidKey(kid: unknown): boolean {
    if (!this.isVoidKey(kid)) return false;
    this.refusedCount++;
    return true;
  }

  /** Whether a kid is void; not counted (also asked of SETs' keys). */
  isVoidKey(kid: unknown): boolean {
    if (typeof kid !== 'string') return false;
    const expiresAt = this.kids.get(kid);
    if (expiresAt === undefined) return false;
    if (this.pastExpiry(expiresAt, this.options.now())) {
      this.kids.delete(kid);
      return false;
    }
    return true;
  }

  /** The verdict for a verified token's payload (`sub`, `iat`). */
  check(payload: { sub?: unknown; iat?: unknown }): RuleVerdict {
    const iat = typeof payload.iat === 'number' ? payload.iat : 0;
    const now = this.options.now();
    if (this.platform && iat <= this.platform.iatMax && !this.pastExpiry(this.platform.expiresAt, now)) return this.refuse();
    const agent = typeof payload.sub === 'string' ? this.agents.get(payload.sub) : undefined;
    if (agent) {
      if (this.pastExpiry(agent.expiresAt, now)) this.agents.delete(payload.sub as string);
      else if (iat <= agent.iatMax) return this.refuse();
    }
    if (!this.isStale()) return 'ok';
    if (this.options.failMode === 'closed' || now > this.openUntil()) return 'unavailable';
    this.acceptedWhileStaleCount++;
    return 'ok-while-stale';
  }

  /** No proof of freshness for longer than staleAfterMs. */
  isStale(): boolean {
    return this.options.now() - this.lastContact > this.options.staleAfterMs;
  }

  /**
   * failMode "open": tokens are accepted until then (ms since the epoch), counted from the last proof of
   * freshness, or from the start for a copy never proven current.
   */
  openUntil(): number {
    return Math.max(this.lastContact, this.createdAt) + this.options.staleAfterMs + this.options.openForMs;
  }

  private refuse(): RuleVerdict {
    this.refusedCount++;
    return 'revoked';
  }

  private pastExpiry(expiresAtSeconds: number, now: number): boolean {
    return (expiresAtSeconds + this.options.clockToleranceSeconds) * 1000 < now;
  }

  private advanceOverHeld(): void {
    while (this.held.delete(this.contiguous + 1)) this.contiguous++;
  }

  /** Every number up to `headSeq` outside `live` is purged: step over those, and over held live ones. */
  private advanceOverPurged(headSeq: number, live: ReadonlyArray<readonly [number, number]>): void {
    let range = 0;
    while (this.contiguous < headSeq) {
      const next = this.contiguous + 1;
      while (range < live.length && live[range]![1] < next) range++;
      const current = live[range];
      if (current === undefined || next < current[0]) {
        // next .. (the next live range's start - 1, or the head) are purged.
        this.contiguous = current === undefined ? headSeq : current[0] - 1;
      } else if (this.held.delete(next)) {
        this.contiguous = next;
      } else {
        break; // a live SET we do not hold: the gap
      }
    }
    for (const seq of this.held) if (seq <= this.contiguous) this.held.delete(seq);
    this.advanceOverHeld();
  }

  private applyEvents(payload: SetPayload): void {
    const subject = payload.sub_id as Record<string, unknown> | undefined;
    for (const [type, raw] of Object.entries(payload.events)) {
      const event = raw as Partial<RevocationEventBody>;
      if (!event || typeof event.expires_at !== 'number') continue;
      if (type === EVENT_SIGNING_KEY_RETIRED && subject?.format === 'opaque' && typeof subject.id === 'string') {
        this.kids.set(subject.id, Math.max(this.kids.get(subject.id) ?? 0, event.expires_at));
      } else if (type === EVENT_PLATFORM_TOKENS_REVOKED && typeof event.iat_max === 'number') {
        this.platform = merge(this.platform, event.iat_max, event.expires_at);
      } else if (
        type === EVENT_SESSION_REVOKED &&
        typeof event.iat_max === 'number' &&
        subject?.format === 'iss_sub' &&
        subject.iss === this.options.issuer &&
        typeof subject.sub === 'string'
      ) {
        this.agents.set(subject.sub, merge(this.agents.get(subject.sub), event.iat_max, event.expires_at));
      }
    }
  }
}

function merge(current: Cutoff | undefined, iatMax: number, expiresAt: number): Cutoff {
  if (!current) return { iatMax, expiresAt };
  return { iatMax: Math.max(current.iatMax, iatMax), expiresAt: Math.max(current.expiresAt, expiresAt) };
}
