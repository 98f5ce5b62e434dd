// The transmitter of the revocation feed: every revocation entry of a platform is one RFC 8417 Security
// Event Token (SET), served by RFC 8936 poll and pushed to WebSocket subscribers (the same SETs), plus a
// signed "stream head" SET re-signed every heartbeat. The head carries the last sequence and the sequences
// still served (`live`), so a receiver can tell a SET that expired from one dropped in transit. The entries
// come from the revocation log (core); SETs are signed through the TokenSigner port (the signing threads);
// the transport (uWS topics) is given at construction.
//
// Cost model: a platform's SETs are signed once and kept in memory, in sequence order, each with its JSON
// fragment; the stream is re-read from the log at most once per `documentReuseMs` (single flight) or on a
// bus notice. A poll answer is a slice of that array joined, for any `ack` / `maxEvents`. Only the two
// shapes every receiver sends are kept serialised (from the start, and "up to date": the head alone), at
// most ANSWERS_PER_STREAM per stream and `answerCacheBytes` in all; the rest are joined per request (the
// routes' per-credential budget bounds how often).
import type { InvalidationBus } from '../ports/invalidation.js';
import type { TokenSigner } from '../ports/crypto.js';
import { BoundedCache } from '../support/bounded-cache.js';
import type { RevocationEntry, RevocationStore } from '../ports/revocation-log.js';
import {
  EVENT_PLATFORM_TOKENS_REVOKED,
  EVENT_SESSION_REVOKED,
  EVENT_SIGNING_KEY_RETIRED,
  EVENT_STREAM_HEAD,
  SET_TYP,
  headJti,
  liveRangesOf,
  revocationJti,
  seqOfJti,
  type LiveRange,
  type PollRequest,
  type SetPayload,
} from '@agent-credential-exchange/middleware/feed-document';

/** Pushes to the subscribers of one platform held by this process (uWS topics in production). */
export interface FeedTransport {
  publish(platformId: string, message: string): void;
  /** Platforms with at least one subscriber on this process. */
  subscribedPlatforms(): string[];
}

export interface RevocationMetricsSink {
  published(seconds: number): void;
  setEntriesLive(count: number): void;
}

/** The key that signs now (KeyManager). */
export interface ActiveSigningKey {
  activeKey(): { kid: string; privateKeyPem: string };
}

export interface RevocationTransmitterPorts {
  log: RevocationStore;
  keys: ActiveSigningKey;
  signer: TokenSigner;
  bus: InvalidationBus;
  transport: FeedTransport;
  metrics: RevocationMetricsSink;
  /** Background work that failed (it is tried again on the next notice or timer). */
  onError: (what: 'revocation_push' | 'revocation_purge', error: unknown) => void;
  issuer: string;
  /** How often this process compares its subscribed platforms' heads with the database (missed messages). */
  pollMs: number;
  /** How long a platform's stream read from the log is reused (bus notices refresh it sooner). */
  documentReuseMs: number;
  /** How often the signed head is re-signed and pushed to subscribers (the heartbeat). */
  heartbeatMs: number;
  /** Bytes of serialised poll answers kept, over every platform (default ANSWER_CACHE_BYTES). */
  answerCacheBytes?: number;
}

/** RFC 8936 leaves the page size to the transmitter when maxEvents is absent. */
export const DEFAULT_MAX_EVENTS = 100;
export const MAX_MAX_EVENTS = 1000;
/** Unknown platform ids are remembered this long (a flood of misses costs one query per id and period). */
const UNKNOWN_PLATFORM_MS = 5000;
export const ANSWER_CACHE_BYTES = 16 * 1024 * 1024;
/** Serialised answers kept per stream (the shapes receivers send: from the start, up to date; a few page sizes). */
const ANSWERS_PER_STREAM = 4;
/** A stream nobody polled or subscribed to for this long is forgotten (read again from the log when asked). */
const STREAM_IDLE_MS = 10 * 60_000;

interface SignedSet {
  seq: number;
  jti: string;
  kid: string;
  jws: string;
  /** `"<jti>":"<jws>"`: the SET's member of a poll answer's `sets`. */
  member: string;
  expiresAtMs: number;
  createdAtMs: number;
}

interface SignedHead {
  jws: string;
  kid: string;
  seq: number;
  /** The `live` it was signed with, as JSON (re-signed when the stream's differs). */
  liveJson: string;
  member: string;
  signedAt: number;
}

interface Stream {
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

export class RevocationTransmitter {
  private readonly streams = new Map<string, Stream>();
  private readonly loading = new Map<string, Promise<Stream | undefined>>();
  private readonly heading = new Map<string, Promise<SignedHead>>();
  private readonly unknown = new BoundedCache<true>({ maxEntries: 10_000, ttlMs: UNKNOWN_PLATFORM_MS });
  /** Per parsed request: the highest sequence it acknowledges, for the platform it was read for. */
  private readonly acknowledged = new WeakMap<PollRequest, { platformId: string; from: number }>();
  /** Per platform: the head this process last pushed to its subscribers. */
  private readonly pushed = new Map<string, number>();
  /** Per platform: the running push, so pushes for one platform never overlap. */
  private readonly pushing = new Map<string, Promise<void>>();
  private timers: NodeJS.Timeout[] = [];
  private cachedBytes = 0;

  private readonly store: RevocationStore;
  private readonly keys: ActiveSigningKey;
  private readonly signer: TokenSigner;
  private readonly transport: FeedTransport;
  private readonly metrics: RevocationMetricsSink;
  private readonly onError: RevocationTransmitterPorts['onError'];
  private readonly maxCachedBytes: number;

  constructor(private readonly options: RevocationTransmitterPorts) {
    ({ log: this.store, keys: this.keys, signer: this.signer, transport: this.transport, metrics: this.metrics, onError: this.onError } = options);
    this.maxCachedBytes = options.answerCacheBytes ?? ANSWER_CACHE_BYTES;
    options.bus.subscribe((message) => {
      if (message.kind === 'revocation') this.notify(message.platformIds, message.at);
      // After a Redis reconnect messages may be lost: compare every subscribed head with the database.
      else if (message.kind === 'all') {
        for (const stream of this.streams.values()) stream.checkedAt = 0;
        void this.pollHeads();
      }
    });
  }

  start(): void {
    this.timers.push(setInterval(() => void this.pollHeads(), this.options.pollMs));
    this.timers.push(setInterval(() => void this.heartbeat(), this.options.heartbeatMs));
    this.timers.push(setInterval(() => void this.purge(), 30_000));
    this.timers.push(setInterval(() => this.sweep(), Math.max(1000, this.options.documentReuseMs)));
    this.timers.forEach((t) => t.unref());
    void this.purge();
  }

  stop(): void {
    this.timers.forEach(clearInterval);
    this.timers = [];
  }

  /** Bytes of serialised poll answers held now (bounded by answerCacheBytes). */
  get answerCacheBytes(): number {
    return this.cachedBytes;
  }

  // --- the stream in memory ---

  /** The platform's stream, re-read from the log at most once per reuse period; undefined: no such platform. */
  private async stream(platformId: string, force = false): Promise<Stream | undefined> {
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
    const active = this.keys.activeKey().kid;
    const fresh = entries.filter((entry) => entry.seq > known);
    // Kept SETs signed by a key that is no longer active (rotated or retired) are signed again, once.
    const kept = await Promise.all(
      (previous?.sets ?? []).filter((set) => set.expiresAtMs > startedAt).map((set) => (set.kid === active ? set : this.resign(platformId, set))),
    );
    const sets = [...kept, ...(await Promise.all(fresh.map((entry) => this.signEntry(entry))))];
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

  /** Whether the platform exists (answered from the stream cache; unknown ids are remembered as unknown). */
  async platformExists(platformId: string): Promise<boolean> {
    return (await this.stream(platformId)) !== undefined;
  }

  // --- signing ---

  private async sign(payload: SetPayload): Promise<{ jws: string; kid: string }> {
    const { kid, privateKeyPem } = this.keys.activeKey();
    const jws = await this.signer.signToken(kid, privateKeyPem, JSON.stringify(payload), undefined, SET_TYP);
    return { jws, kid };
  }

  private async signEntry(entry: RevocationEntry): Promise<SignedSet> {
    const payload = this.setPayload(entry);
    const { jws, kid } = await this.sign(payload);
    return { seq: entry.seq, jti: payload.jti, kid, jws, member: member(payload.jti, jws), expiresAtMs: entry.expiresAt.getTime(), createdAtMs: entry.createdAt.getTime() };
  }

  private async resign(platformId: string, set: SignedSet): Promise<SignedSet> {
    const payload = JSON.parse(Buffer.from(set.jws.split('.')[1], 'base64url').toString()) as SetPayload;
    if (payload.aud !== platformId) throw new Error('cached SET of another platform');
    const { jws, kid } = await this.sign(payload);
    return { ...set, jws, kid, member: member(set.jti, jws) };
  }

  /** One revocation entry as a SET; iat is the entry's creation, so the same entry signs to the same bytes. */
  private setPayload(entry: RevocationEntry): SetPayload {
    const iat = Math.floor(entry.createdAt.getTime() / 1000);
    const expires_at = Math.floor(entry.expiresAt.getTime() / 1000);
    const base = { iss: this.options.issuer, aud: entry.platformId, iat, jti: revocationJti(entry.platformId, entry.seq) };
    if (entry.kind === 'agent') {
      return {
        ...base,
        sub_id: { format: 'iss_sub', iss: this.options.issuer, sub: entry.agentId! },
        events: { [EVENT_SESSION_REVOKED]: { event_timestamp: iat, iat_max: entry.iatMax!, expires_at } },
      };
    }
    if (entry.kind === 'platform') {
      return {
        ...base,
        sub_id: { format: 'opaque', id: entry.platformId },
        events: { [EVENT_PLATFORM_TOKENS_REVOKED]: { event_timestamp: iat, iat_max: entry.iatMax!, expires_at } },
      };
    }
    return {
      ...base,
      sub_id: { format: 'opaque', id: entry.kid! },
      events: { [EVENT_SIGNING_KEY_RETIRED]: { event_timestamp: iat, expires_at } },
    };
  }

  /** Whether the stream's signed head may be served now: same head and live sequences, same key, young enough. */
  private headIsCurrent(stream: Stream, now: number): stream is Stream & { headSet: SignedHead } {
    const current = stream.headSet;
    return (
      current !== undefined &&
      current.seq === stream.head &&
      current.liveJson === stream.liveJson &&
      now - current.signedAt < this.options.heartbeatMs / 2 &&
      current.kid === this.keys.activeKey().kid
    );
  }

  /**
   * The signed head of a stream: `{seq, live}` of exactly the SETs this stream serves, re-signed when older
   * than half a heartbeat, when the head or the live sequences moved, or when the key changed.
   */
  private headSet(platformId: string, stream: Stream): Promise<SignedHead> {
    const now = Date.now();
    if (this.headIsCurrent(stream, now)) return Promise.resolve(stream.headSet);
    let signing = this.heading.get(platformId);
    if (!signing) {
      const { head: seq, live, liveJson } = stream;
      signing = this.sign({
        iss: this.options.issuer,
        aud: platformId,
        iat: Math.floor(now / 1000),
        jti: headJti(platformId),
        sub_id: { format: 'opaque', id: platformId },
        events: { [EVENT_STREAM_HEAD]: { seq, live } },
      })
        .then(({ jws, kid }) => {
          const signed: SignedHead = { jws, kid, seq, liveJson, member: member(headJti(platformId), jws), signedAt: now };
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

  // --- poll (RFC 8936) ---

  /** The highest sequence the request acknowledges (SETs are delivered in sequence order). */
  private fromOf(platformId: string, request: PollRequest): number {
    const known = this.acknowledged.get(request);
    if (known !== undefined && known.platformId === platformId) return known.from;
    let from = 0;
    for (const jti of request.ack ?? []) from = Math.max(from, seqOfJti(jti, platformId) ?? 0);
    this.acknowledged.set(request, { platformId, from });
    return from;
  }

  /**
   * The poll answer when it can be given from memory at once (the stream fresh, its head signed and
   * current): every poll of a steady stream, without a promise round. Undefined: call poll().
   */
  pollNow(platformId: string, request: PollRequest): Buffer | undefined {
    const stream = this.streams.get(platformId);
    const now = Date.now();
    if (!stream || now - stream.checkedAt >= this.options.documentReuseMs || !this.headIsCurrent(stream, now)) return undefined;
    stream.usedAt = now;
    const last = stream.lastAnswer;
    // The same parsed request (the routes keep one object per body) on the same stream and head: the same answer.
    if (last !== undefined && last.request === request) return last.body;
    return this.answer(stream, stream.headSet, platformId, request);
  }

  /**
   * Stateless: the service keeps no per-receiver state, so an `ack` acknowledges every SET of the stream up
   * to the highest acknowledged sequence; without an ack the answer starts at the oldest live SET. The
   * head SET ends every answer that reaches it (receivers that do not know its event type ignore it).
   */
  async poll(platformId: string, request: PollRequest): Promise<Buffer | undefined> {
    const stream = await this.stream(platformId);
    if (!stream) return undefined;
    stream.usedAt = Date.now();
    return this.answer(stream, await this.headSet(platformId, stream), platformId, request);
  }

  private answer(stream: Stream, head: SignedHead, platformId: string, request: PollRequest): Buffer {
    const { sets } = stream;
    const first = firstAbove(sets, this.fromOf(platformId, request));
    const max = request.maxEvents ?? DEFAULT_MAX_EVENTS;
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

  /** Frees the answers of streams that must be read again before serving, and forgets idle streams. */
  private sweep(): void {
    const now = Date.now();
    const subscribed = new Set(this.transport.subscribedPlatforms());
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

  // --- push ---

  /** A new subscriber: the SETs above its `since` then the head; starts tracking the platform's head. */
  async subscribed(platformId: string, since: number): Promise<string[]> {
    const stream = await this.stream(platformId);
    if (!stream) return [];
    stream.usedAt = Date.now();
    if (!this.pushed.has(platformId)) this.pushed.set(platformId, stream.head);
    const head = await this.headSet(platformId, stream);
    return [...stream.sets.slice(firstAbove(stream.sets, since)).map((s) => s.jws), head.jws];
  }

  /** Entries were appended for these platforms (here or on another instance, `at` ms): push what is new. */
  notify(platformIds: string[], at?: number): void {
    for (const platformId of platformIds) {
      const stream = this.streams.get(platformId);
      if (stream) stream.checkedAt = 0;
    }
    const subscribed = new Set(this.transport.subscribedPlatforms());
    for (const platformId of platformIds) if (subscribed.has(platformId)) this.push(platformId, at);
  }

  private push(platformId: string, at?: number): void {
    const previous = this.pushing.get(platformId) ?? Promise.resolve();
    const next = previous
      .then(async () => {
        const from = this.pushed.get(platformId) ?? 0;
        const stream = await this.stream(platformId, true);
        if (!stream || stream.head <= from) return;
        const fresh = stream.sets.slice(firstAbove(stream.sets, from));
        // The SETs at once; the head (signed for this stream's live ranges) after them.
        for (const set of fresh) this.transport.publish(platformId, set.jws);
        this.transport.publish(platformId, (await this.headSet(platformId, stream)).jws);
        this.pushed.set(platformId, stream.head);
        const now = Date.now();
        // Publish-to-send: from the admin write (bus message time, else the entry's creation) to this send.
        for (const set of fresh) this.metrics.published(Math.max(0, now - (at ?? set.createdAtMs)) / 1000);
      })
      .catch((error) => this.onError('revocation_push', error))
      .finally(() => {
        if (this.pushing.get(platformId) === next) this.pushing.delete(platformId);
      });
    this.pushing.set(platformId, next);
  }

  /** Every subscribed platform gets its freshly signed head: the heartbeat a proxy cannot fake or replay. */
  private async heartbeat(): Promise<void> {
    for (const platformId of this.transport.subscribedPlatforms()) {
      try {
        const stream = await this.stream(platformId);
        if (stream) this.transport.publish(platformId, (await this.headSet(platformId, stream)).jws);
      } catch (error) {
        this.onError('revocation_push', error);
      }
    }
  }

  /** Safety net for lost bus messages (Redis restart, no Redis in a test of several processes). */
  private async pollHeads(): Promise<void> {
    const platforms = this.transport.subscribedPlatforms();
    for (const id of this.pushed.keys()) if (!platforms.includes(id)) this.pushed.delete(id);
    if (platforms.length === 0) return;
    try {
      const heads = await this.store.heads(platforms);
      for (const [platformId, head] of heads) if (head > (this.pushed.get(platformId) ?? 0)) this.push(platformId);
    } catch (error) {
      this.onError('revocation_push', error);
    }
  }

  private async purge(): Promise<void> {
    try {
      this.metrics.setEntriesLive(await this.store.purgeExpired(new Date()));
    } catch (error) {
      this.onError('revocation_purge', error);
    }
  }
}

/** A member of a poll answer's `sets` object (jti and compact JWS hold no character JSON escapes, but the encoder decides). */
function member(jti: string, jws: string): string {
  return `${JSON.stringify(jti)}:${JSON.stringify(jws)}`;
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
