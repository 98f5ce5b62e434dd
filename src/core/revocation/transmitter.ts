// The transmitter of the revocation feed: every revocation entry of a platform is one RFC 8417 Security
// Event Token (SET), served by RFC 8936 poll and pushed to WebSocket subscribers (the same SETs), plus a
// signed "stream head" SET re-signed every heartbeat. The head carries the last sequence and the sequences
// still served (`live`), so a receiver can tell a SET that expired from one dropped in transit. The entries
// come from the revocation log (core); the transport (uWS topics) is given at construction.
//
// Three parts: the streams in memory (stream.ts: each platform's SETs, its signed head, the poll answers kept
// serialised), the SETs and their signing through the TokenSigner port (set-signing.ts: the signing
// threads), and here the delivery: poll answers, push to subscribers, the heartbeat, the timers.
import type { InvalidationBus } from '../ports/invalidation.js';
import type { TokenSigner } from '../ports/crypto.js';
import type { RevocationStore } from '../ports/revocation-log.js';
import { seqOfJti, type PollRequest } from '@agent-credential-exchange/protocol/feed-document';
import { SetSigning, type ActiveSigningKey, type SignedHead } from './set-signing.js';
import { firstAbove, RevocationStreams, type Stream } from './stream.js';

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
  /** Bytes of serialised poll answers kept, over every platform (default ANSWER_CACHE_BYTES, stream.ts). */
  answerCacheBytes?: number;
}

/** RFC 8936 leaves the page size to the transmitter when maxEvents is absent. */
export const DEFAULT_MAX_EVENTS = 100;
export const MAX_MAX_EVENTS = 1000;

export class RevocationTransmitter {
  private readonly streams: RevocationStreams;
  /** Per parsed request: the highest sequence it acknowledges, for the platform it was read for. */
  private readonly acknowledged = new WeakMap<PollRequest, { platformId: string; from: number }>();
  /** Per platform: the head this process last pushed to its subscribers. */
  private readonly pushed = new Map<string, number>();
  /** Per platform: the running push, so pushes for one platform never overlap. */
  private readonly pushing = new Map<string, Promise<void>>();
  private timers: NodeJS.Timeout[] = [];

  private readonly store: RevocationStore;
  private readonly transport: FeedTransport;
  private readonly metrics: RevocationMetricsSink;
  private readonly onError: RevocationTransmitterPorts['onError'];

  constructor(private readonly options: RevocationTransmitterPorts) {
    ({ log: this.store, transport: this.transport, metrics: this.metrics, onError: this.onError } = options);
    const signing = new SetSigning({ keys: options.keys, signer: options.signer, issuer: options.issuer });
    this.streams = new RevocationStreams({
      log: options.log,
      signing,
      documentReuseMs: options.documentReuseMs,
      heartbeatMs: options.heartbeatMs,
      answerCacheBytes: options.answerCacheBytes,
    });
    options.bus.subscribe((message) => {
      if (message.kind === 'revocation') this.notify(message.platformIds, message.at);
      // After a Redis reconnect messages may be lost: compare every subscribed head with the database.
      else if (message.kind === 'all') {
        this.streams.allStale();
        void this.pollHeads();
      }
    });
  }

  start(): void {
    this.timers.push(setInterval(() => void this.pollHeads(), this.options.pollMs));
    this.timers.push(setInterval(() => void this.heartbeat(), this.options.heartbeatMs));
    this.timers.push(setInterval(() => void this.purge(), 30_000));
    this.timers.push(setInterval(() => this.streams.sweep(new Set(this.transport.subscribedPlatforms())), Math.max(1000, this.options.documentReuseMs)));
    this.timers.forEach((t) => t.unref());
    void this.purge();
  }

  stop(): void {
    this.timers.forEach(clearInterval);
    this.timers = [];
  }

  /** Bytes of serialised poll answers held now (bounded by answerCacheBytes). */
  get answerCacheBytes(): number {
    return this.streams.answerCacheBytes;
  }

  /** Whether the platform exists (answered from the stream cache; unknown ids are remembered as unknown). */
  async platformExists(platformId: string): Promise<boolean> {
    return (await this.streams.stream(platformId)) !== undefined;
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
    const now = Date.now();
    const stream = this.streams.current(platformId, now);
    if (!stream) return undefined;
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
    const stream = await this.streams.stream(platformId);
    if (!stream) return undefined;
    stream.usedAt = Date.now();
    return this.answer(stream, await this.streams.headSet(platformId, stream), platformId, request);
  }

  private answer(stream: Stream, head: SignedHead, platformId: string, request: PollRequest): Buffer {
    return this.streams.answer(stream, head, platformId, this.fromOf(platformId, request), request.maxEvents ?? DEFAULT_MAX_EVENTS, request);
  }

  /** A platform's serialised answers are no longer wanted (its last feed credential was deleted). */
  release(platformId: string): void {
    this.streams.release(platformId);
  }

  // --- push ---

  /** A new subscriber: the SETs above its `since` then the head; starts tracking the platform's head. */
  async subscribed(platformId: string, since: number): Promise<string[]> {
    const stream = await this.streams.stream(platformId);
    if (!stream) return [];
    stream.usedAt = Date.now();
    if (!this.pushed.has(platformId)) this.pushed.set(platformId, stream.head);
    const head = await this.streams.headSet(platformId, stream);
    return [...stream.sets.slice(firstAbove(stream.sets, since)).map((s) => s.jws), head.jws];
  }

  /** Entries were appended for these platforms (here or on another instance, `at` ms): push what is new. */
  notify(platformIds: string[], at?: number): void {
    for (const platformId of platformIds) this.streams.stale(platformId);
    const subscribed = new Set(this.transport.subscribedPlatforms());
    for (const platformId of platformIds) if (subscribed.has(platformId)) this.push(platformId, at);
  }

  private push(platformId: string, at?: number): void {
    const previous = this.pushing.get(platformId) ?? Promise.resolve();
    const next = previous
      .then(async () => {
        const from = this.pushed.get(platformId) ?? 0;
        const stream = await this.streams.stream(platformId, true);
        if (!stream || stream.head <= from) return;
        const fresh = stream.sets.slice(firstAbove(stream.sets, from));
        // The SETs at once; the head (signed for this stream's live ranges) after them.
        for (const set of fresh) this.transport.publish(platformId, set.jws);
        this.transport.publish(platformId, (await this.streams.headSet(platformId, stream)).jws);
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
        const stream = await this.streams.stream(platformId);
        if (stream) this.transport.publish(platformId, (await this.streams.headSet(platformId, stream)).jws);
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
