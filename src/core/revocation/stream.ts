// The revocation feed's streams in memory, one per platform: its SETs signed once and kept in sequence
// order, each with its JSON fragment, and its signed head. A stream is re-read from the log at most once
// per `documentReuseMs` (single flight), or sooner once marked stale (a bus notice). A poll answer is a
// slice of that array joined, for any `ack` / `maxEvents`. Only the two shapes every receiver sends are
// kept serialised (from the start, and "up to date": the head alone), at most ANSWERS_PER_STREAM per stream
// and `answerCacheBytes` in all; the rest are joined per request (the routes' per-credential budget bounds
// how often).
import { BoundedCache } from '../support/bounded-cache.js';
import type { RevocationStore } from '../ports/revocation-log.js';
import { liveRangesOf, type LiveRange, type PollRequest } from '@agent-credential-exchange/protocol/feed-document';
import type { SetSigning, SignedHead, SignedSet } from './set-signing.js';

/** Unknown platform ids are remembered this long (a flood of misses costs one query per id and period). */
const UNKNOWN_PLATFORM_MS = 5000;
export const ANSWER_CACHE_BYTES = 16 * 1024 * 1024;
/** Serialised answers kept per stream (the shapes receivers send: from the start, up to date; a few page sizes). */
const ANSWERS_PER_STREAM = 4;
/** A stream nobody polled or subscribed to for this long is forgotten (read again from the log when asked). */
const STREAM_IDLE_MS = 10 * 60_000;

export interface Stream {
  head: number;
  /** The SETs served, ascending by sequence (expired ones dropped at each read of the log). */
  sets: SignedSet[];
  /** The sequences of `sets` as live ranges, and as JSON. */
  live: LiveRange[];
  liveJson: string;
  checkedAt: number;
  usedAt: number;
  headSet?: SignedHead;
  /** Serialised answers for this stream and head, keyed by the slice `<first index>:<end index>`. */
  answers: Map<string, Buffer>;
  answerBytes: number;
  /** The last answer given from `answers`, for the same parsed request (a receiver repeats its poll). */
  lastAnswer?: { request: PollRequest; body: Buffer };
}

export interface RevocationStreamsOptions {
  log: RevocationStore;
  signing: SetSigning;
  /** How long a platform's stream read from the log is reused (bus notices refresh it sooner). */
  documentReuseMs: number;
  /** How often the signed head is re-signed (the heartbeat): a head older than half of it is signed again. */
  heartbeatMs: number;
  /** Bytes of serialised poll answers kept, over every platform (default ANSWER_CACHE_BYTES). */
  answerCacheBytes?: number;
}

export class RevocationStreams {
  private readonly streams = new Map<string, Stream>();
  private readonly loading = new Map<string, Promise<Stream | undefined>>();
  private readonly heading = new Map<string, Promise<SignedHead>>();
  private readonly unknown = new BoundedCache<true>({ maxEntries: 10_000, ttlMs: UNKNOWN_PLATFORM_MS });
  private cachedBytes = 0;

  private readonly store: RevocationStore;
  private readonly signing: SetSigning;
  private readonly maxCachedBytes: number;

  constructor(private readonly options: RevocationStreamsOptions) {
    ({ log: this.store, signing: this.signing } = options);
    this.maxCachedBytes = options.answerCacheBytes ?? ANSWER_CACHE_BYTES;
  }

  /** Bytes of serialised poll answers held now (bounded by answerCacheBytes). */
  get answerCacheBytes(): number {
    return this.cachedBytes;
  }

  /** The platform's stream, re-read from the log at most once per reuse period; undefined: no such platform. */
  async stream(platformId: string, force = false): Promise<Stream | undefined> {
    const cached = this.streams.get(platformId);
    if (cached && !force && Date.now() - cached.checkedAt < this.options.documentReuseMs) return cached;
    if (!cached && this.unknown.get(platformId)) return undefined;
    let load = this.loading.get(platformId);
    if (!load) {
      load = this.load(platformId).finally(() => this.loading.delete(platformId));
      this.loading.set(platformId, load);
    }
    return load;
  }

  private async load(platformId: string): Promise<Stream | undefined> {
    const previous = this.streams.get(platformId);
    if (!previous && !(await this.store.platformExists(platformId))) {
      this.unknown.set(platformId, true);
      return undefined;
    }
    const known = previous?.head ?? 0;
    const startedAt = Date.now();
    const { head, entries } = await this.store.since(platformId, known, new Date(startedAt));
    const active = this.signing.activeKid();
    const fresh = entries.filter((entry) => entry.seq > known);
    // Kept SETs signed by a key that is no longer active (rotated or retired) are signed again, once.
    const kept = await Promise.all(
      (previous?.sets ?? []).filter((set) => set.expiresAtMs > startedAt).map((set) => (set.kid === active ? set : this.signing.resign(platformId, set))),
    );
    const sets = [...kept, ...(await Promise.all(fresh.map((entry) => this.signing.signEntry(entry))))];
    sets.sort((a, b) => a.seq - b.seq);
    const live = liveRangesOf(sets.map((set) => set.seq));
    const liveJson = JSON.stringify(live);
    const unchanged = previous !== undefined && previous.head === Math.max(head, known) && previous.liveJson === liveJson && kept.every((set, i) => set === previous.sets[i]);
    if (unchanged) {
      // Nothing new: the same object (and its serialised answers) serves on.
      previous.checkedAt = startedAt;
      return previous;
    }
    const next: Stream = {
      head: Math.max(head, known),
      sets,
      live,
      liveJson,
      checkedAt: startedAt,
      usedAt: previous?.usedAt ?? startedAt,
      headSet: previous?.headSet,
      answers: new Map(),
      answerBytes: 0,
    };
    if (previous) this.dropAnswers(previous);
    this.streams.set(platformId, next);
    return next;
  }

  /**
   * The stream when it may serve at once from memory (fresh, its head signed and current), else undefined:
   * every poll of a steady stream, without a promise round.
   */
  current(platformId: string, now: number): (Stream & { headSet: SignedHead }) | undefined {
    const stream = this.streams.get(platformId);
    if (!stream || now - stream.checkedAt >= this.options.documentReuseMs || !this.headIsCurrent(stream, now)) return undefined;
    return stream;
  }

  /** The platform's stream is read again from the log at its next use (entries were appended). */
  stale(platformId: string): void {
    const stream = this.streams.get(platformId);
    if (stream) stream.checkedAt = 0;
  }

  /** Every stream is read again at its next use (bus messages may have been lost). */
  allStale(): void {
    for (const stream of this.streams.values()) stream.checkedAt = 0;
  }

  /** Whether the stream's signed head may be served now: same head and live sequences, same key, young enough. */
  private headIsCurrent(stream: Stream, now: number): stream is Stream & { headSet: SignedHead } {
    const current = stream.headSet;
    return (
      current !== undefined &&
      current.seq === stream.head &&
      current.liveJson === stream.liveJson &&
      now - current.signedAt < this.options.heartbeatMs / 2 &&
      current.kid === this.signing.activeKid()
    );
  }

  /**
   * The signed head of a stream: `{seq, live}` of exactly the SETs this stream serves, re-signed when older
   * than half a heartbeat, when the head or the live sequences moved, or when the key changed.
   */
  headSet(platformId: string, stream: Stream): Promise<SignedHead> {
    const now = Date.now();
    if (this.headIsCurrent(stream, now)) return Promise.resolve(stream.headSet);
    let signing = this.heading.get(platformId);
    if (!signing) {
      const { head: seq, live, liveJson } = stream;
      signing = this.signing
        .signHead(platformId, seq, live, liveJson, now)
        .then((signed) => {
          const latest = this.streams.get(platformId);
          // Kept on the stream it describes only (a stream read meanwhile gets its own head on its next use).
          if (latest !== undefined && latest.head === seq && latest.liveJson === liveJson) {
            latest.headSet = signed;
            this.dropAnswers(latest);
          }
          return signed;
        })
        .finally(() => this.heading.delete(platformId));
      this.heading.set(platformId, signing);
    }
    return signing.then((signed) => (signed.seq === stream.head && signed.liveJson === stream.liveJson ? signed : this.headSet(platformId, stream)));
  }

  /**
   * The answer of the SETs above `from`, at most `max`, the head after them when the page reaches it; `request`
   * is the parsed request it answers (the same object again gets the same answer: Stream.lastAnswer).
   */
  answer(stream: Stream, head: SignedHead, platformId: string, from: number, max: number, request: PollRequest): Buffer {
    const { sets } = stream;
    const first = firstAbove(sets, from);
    const end = Math.min(sets.length, first + max);
    // Only the shapes receivers send are kept: from the start (a new receiver) and past the last SET (up to date);
    // and only on the stream and head in force (a stream replaced meanwhile would keep them out of the sweep's sight).
    const cacheable = (first === 0 || first === sets.length) && stream.headSet === head && this.streams.get(platformId) === stream;
    const key = `${first}:${end}`;
    let body = cacheable ? stream.answers.get(key) : undefined;
    if (body === undefined) {
      body = pollAnswer(sets, first, end, head.member);
      if (cacheable) this.keepAnswer(stream, key, body);
    }
    if (stream.answers.get(key) === body) stream.lastAnswer = { request, body };
    return body;
  }

  private keepAnswer(stream: Stream, key: string, body: Buffer): void {
    if (stream.answers.size >= ANSWERS_PER_STREAM) {
      const [oldest, bytes] = stream.answers.entries().next().value as [string, Buffer];
      stream.answers.delete(oldest);
      stream.answerBytes -= bytes.length;
      this.cachedBytes -= bytes.length;
      stream.lastAnswer = undefined;
    }
    if (this.cachedBytes + body.length > this.maxCachedBytes) return;
    stream.answers.set(key, body);
    stream.answerBytes += body.length;
    this.cachedBytes += body.length;
  }

  private dropAnswers(stream: Stream): void {
    this.cachedBytes -= stream.answerBytes;
    stream.answerBytes = 0;
    stream.answers.clear();
    stream.lastAnswer = undefined;
  }

  /** Frees the answers of streams that must be read again before serving, and forgets idle streams (none of `subscribed`). */
  sweep(subscribed: ReadonlySet<string>): void {
    const now = Date.now();
    for (const [platformId, stream] of this.streams) {
      if (now - stream.usedAt >= STREAM_IDLE_MS && !subscribed.has(platformId) && !this.loading.has(platformId)) {
        this.dropAnswers(stream);
        this.streams.delete(platformId);
      } else if (now - stream.checkedAt >= this.options.documentReuseMs || now - (stream.headSet?.signedAt ?? 0) >= this.options.heartbeatMs / 2) {
        // Stale: the next poll reads the stream again or signs a new head, and these answers would not serve.
        this.dropAnswers(stream);
      }
    }
  }

  /** A platform's serialised answers are no longer wanted (its last feed credential was deleted). */
  release(platformId: string): void {
    const stream = this.streams.get(platformId);
    if (stream) this.dropAnswers(stream);
  }
}

/** Index of the first SET whose sequence is above `from` (sets ascending by sequence). */
export function firstAbove(sets: readonly { seq: number }[], from: number): number {
  let low = 0;
  let high = sets.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (sets[middle].seq <= from) low = middle + 1;
    else high = middle;
  }
  return low;
}

/**
 * The RFC 8936 answer for the SETs `sets[first..end)`: the head's member ends it when the page reaches the
 * last SET (a receiver told the head with SETs still to fetch would poll again anyway).
 */
export function pollAnswer(sets: readonly { member: string }[], first: number, end: number, headMember: string): Buffer {
  const members: string[] = [];
  for (let i = first; i < end; i++) members.push(sets[i].member);
  const more = end < sets.length;
  if (!more) members.push(headMember);
  return Buffer.from(`{"sets":{${members.join(',')}},"moreAvailable":${more}}`);
}
