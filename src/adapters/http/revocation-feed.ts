// The revocation feed as a transport: every revocation entry of a platform is one RFC 8417 Security Event
// Token (SET), served by RFC 8936 poll and pushed over a WebSocket (the same SETs), plus a signed "stream
// head" SET re-signed every heartbeat so that a receiver can prove how fresh its copy is. The entries come
// from the revocation log (core); the transport (uWS topics) is given by revocation-routes.ts.
//
// Cost model (issue #26 c): a platform's SETs are signed once and kept in memory; its stream is re-read
// from the log at most once per `documentReuseMs` (single flight) or on a bus notice, and poll answers are
// kept serialised. A request therefore costs a map lookup and a cached string, whatever the number of live
// entries or of requests; an unknown platform id is remembered as unknown for a few seconds.
import { importPKCS8, SignJWT } from 'jose';

type KeyLike = Awaited<ReturnType<typeof importPKCS8>>;
import type { KeyManager } from '../../core/keys/key-manager.js';
import type { InvalidationBus } from '../../core/ports/invalidation.js';
import { BoundedCache } from '../../core/support/bounded-cache.js';
import type { RevocationEntry, RevocationStore } from '../../core/ports/revocation-log.js';
import {
  EVENT_PLATFORM_TOKENS_REVOKED,
  EVENT_SESSION_REVOKED,
  EVENT_SIGNING_KEY_RETIRED,
  EVENT_STREAM_HEAD,
  SET_TYP,
  headJti,
  revocationJti,
  seqOfJti,
  type PollRequest,
  type SetPayload,
} from '@agent-credential-exchange/middleware/feed-document';

/** Pushes to the subscribers of one platform held by this process (uWS pub/sub in production). */
export interface FeedTransport {
  publish(platformId: string, message: string): void;
  /** Platforms with at least one subscriber on this process. */
  subscribedPlatforms(): string[];
}

export interface RevocationMetricsSink {
  published(seconds: number): void;
  setEntriesLive(count: number): void;
}

export interface RevocationFeedPorts {
  log: RevocationStore;
  keys: KeyManager;
  bus: InvalidationBus;
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
}

/** RFC 8936 leaves the page size to the transmitter when maxEvents is absent. */
export const DEFAULT_MAX_EVENTS = 100;
export const MAX_MAX_EVENTS = 1000;
/** Unknown platform ids are remembered this long (a flood of misses costs one query per id and period). */
const UNKNOWN_PLATFORM_MS = 5000;

interface SignedSet {
  seq: number;
  jti: string;
  kid: string;
  jws: string;
  expiresAtMs: number;
  createdAtMs: number;
}

interface Stream {
  head: number;
  sets: SignedSet[];
  checkedAt: number;
  /** Bumped whenever `sets` or the head SET change: part of the poll answer cache key. */
  version: number;
  headSet?: { jws: string; kid: string; seq: number; signedAt: number };
  /** The last answer given from memory, for the same parsed request (a receiver repeats its poll). */
  lastAnswer?: { request: PollRequest; version: number; body: Buffer; at: number };
}

export class RevocationFeed {
  private readonly streams = new Map<string, Stream>();
  private readonly loading = new Map<string, Promise<Stream | undefined>>();
  private readonly heading = new Map<string, Promise<string>>();
  private readonly unknown = new BoundedCache<true>(10_000, UNKNOWN_PLATFORM_MS);
  /** Serialised poll answers, as Buffers: sent as they are, with no UTF-8 encoding per request. */
  private readonly answers: BoundedCache<Buffer>;
  private readonly signingKeys = new Map<string, Promise<KeyLike>>();
  /** Per platform: the head this process last pushed to its subscribers. */
  private readonly pushed = new Map<string, number>();
  /** Per platform: the running push, so pushes for one platform never overlap. */
  private readonly pushing = new Map<string, Promise<void>>();
  private transport: FeedTransport | undefined;
  private timers: NodeJS.Timeout[] = [];

  private readonly store: RevocationStore;
  private readonly keys: KeyManager;
  private readonly metrics: RevocationMetricsSink;
  private readonly onError: RevocationFeedPorts['onError'];

  constructor(private readonly options: RevocationFeedPorts) {
    ({ log: this.store, keys: this.keys, metrics: this.metrics, onError: this.onError } = options);
    this.answers = new BoundedCache<Buffer>(10_000, options.documentReuseMs);
    options.bus.subscribe((message) => {
      if (message.kind === 'revocation') this.notify(message.platformIds, message.at);
      // After a Redis reconnect messages may be lost: compare every subscribed head with the database.
      else if (message.kind === 'all') {
        for (const stream of this.streams.values()) stream.checkedAt = 0;
        void this.pollHeads();
      }
    });
  }

  /**
   * Late binding on purpose (reviewed for issue #25): the transport cannot be a constructor port without
   * restructuring three pieces for one setter. The feed must exist before the public uWS app does (the app
   * is made by HttpServer from a route list that holds this feed's poll route), while the transport is
   * that app's topics plus the subscriber table its socket handlers keep (attachRevocationSockets in
   * revocation-routes.ts, which registers those handlers and attaches in the same call). Injecting it at
   * construction would mean the composition root making the uWS app before the domain, HttpServer taking
   * an app it did not make, and the subscriber bookkeeping moving out of the socket handlers. Until
   * attached, pushes are skipped (no socket can have subscribed: the handlers do not exist yet) and
   * `start()` is called only after attaching (src/app/servers.ts), so the window has no effect.
   */
  attach(transport: FeedTransport): void {
    if (this.transport) throw new Error('RevocationFeed: a transport is attached already');
    this.transport = transport;
  }

  start(): void {
    this.timers.push(setInterval(() => void this.pollHeads(), this.options.pollMs));
    this.timers.push(setInterval(() => void this.heartbeat(), this.options.heartbeatMs));
    this.timers.push(setInterval(() => void this.purge(), 30_000));
    this.timers.forEach((t) => t.unref());
    void this.purge();
  }

  stop(): void {
    this.timers.forEach(clearInterval);
    this.timers = [];
  }

  // --- the stream in memory ---

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
    let stream = this.streams.get(platformId);
    if (!stream) {
      if (!(await this.store.platformExists(platformId))) {
        this.unknown.set(platformId, true);
        return undefined;
      }
      stream = { head: 0, sets: [], checkedAt: 0, version: 0 };
    }
    const startedAt = Date.now();
    const { head, entries } = await this.store.since(platformId, stream.head, new Date(startedAt));
    const live = stream.sets.filter((s) => s.expiresAtMs > startedAt);
    let changed = live.length !== stream.sets.length;
    const active = this.keys.activeKey().kid;
    for (const entry of entries) if (entry.seq > stream.head) live.push(await this.signEntry(entry));
    // Sets signed by a key that is no longer active (rotated or retired) are signed again, once.
    for (let i = 0; i < live.length; i++) {
      if (live[i].kid !== active) {
        live[i] = await this.resign(platformId, live[i]);
        changed = true;
      }
    }
    if (entries.length > 0 || head !== stream.head) changed = true;
    const next: Stream = { head: Math.max(head, stream.head), sets: live, checkedAt: startedAt, version: stream.version + (changed ? 1 : 0), headSet: stream.headSet };
    this.streams.set(platformId, next);
    return next;
  }

  /** Whether the platform exists (answered from the stream cache; unknown ids are remembered as unknown). */
  async platformExists(platformId: string): Promise<boolean> {
    return (await this.stream(platformId)) !== undefined;
  }

  // --- signing ---

  private signingKey(): { kid: string; key: Promise<KeyLike> } {
    const active = this.keys.activeKey();
    let key = this.signingKeys.get(active.kid);
    if (!key) {
      key = importPKCS8(active.privateKeyPem, 'RS256');
      this.signingKeys.set(active.kid, key);
    }
    return { kid: active.kid, key };
  }

  private async sign(payload: SetPayload): Promise<{ jws: string; kid: string }> {
    const { kid, key } = this.signingKey();
    const jws = await new SignJWT(payload as unknown as Record<string, unknown>)
      .setProtectedHeader({ alg: 'RS256', kid, typ: SET_TYP })
      .sign(await key);
    return { jws, kid };
  }

  private async signEntry(entry: RevocationEntry): Promise<SignedSet> {
    const payload = this.setPayload(entry);
    const { jws, kid } = await this.sign(payload);
    return { seq: entry.seq, jti: payload.jti, kid, jws, expiresAtMs: entry.expiresAt.getTime(), createdAtMs: entry.createdAt.getTime() };
  }

  private async resign(platformId: string, set: SignedSet): Promise<SignedSet> {
    const payload = JSON.parse(Buffer.from(set.jws.split('.')[1], 'base64url').toString()) as SetPayload;
    if (payload.aud !== platformId) throw new Error('cached SET of another platform');
    const { jws, kid } = await this.sign(payload);
    return { ...set, jws, kid };
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

  /** The signed head of a stream, re-signed when older than half a heartbeat, the head moved or the key changed. */
  private headSet(platformId: string, stream: Stream): Promise<string> {
    const now = Date.now();
    const current = stream.headSet;
    const activeKid = this.keys.activeKey().kid;
    if (current && current.seq === stream.head && current.kid === activeKid && now - current.signedAt < this.options.heartbeatMs / 2) {
      return Promise.resolve(current.jws);
    }
    let signing = this.heading.get(platformId);
    if (!signing) {
      const seq = stream.head;
      signing = this.sign({
        iss: this.options.issuer,
        aud: platformId,
        iat: Math.floor(now / 1000),
        jti: headJti(platformId),
        sub_id: { format: 'opaque', id: platformId },
        events: { [EVENT_STREAM_HEAD]: { seq } },
      })
        .then(({ jws, kid }) => {
          const latest = this.streams.get(platformId) ?? stream;
          latest.headSet = { jws, kid, seq, signedAt: now };
          latest.version++;
          return jws;
        })
        .finally(() => this.heading.delete(platformId));
      this.heading.set(platformId, signing);
    }
    return signing;
  }

  // --- poll (RFC 8936) ---

  /**
   * The poll answer (JSON) or undefined for an unknown platform. Stateless: the service keeps no
   * per-receiver state, so an `ack` acknowledges every SET of the stream up to the highest acknowledged
   * sequence (SETs are delivered in sequence order); without an ack the answer starts at the oldest live
   * SET. The current head SET is always included (receivers that do not know its event type ignore it).
   */
  /**
   * The poll answer when it can be given from memory at once (the stream fresh, the head SET current and
   * this answer serialised already): the common poll of an up-to-date receiver, or a flood of one request,
   * without a promise round. Undefined: call poll().
   */
  pollNow(platformId: string, request: PollRequest): Buffer | undefined {
    const stream = this.streams.get(platformId);
    const now = Date.now();
    if (!stream || now - stream.checkedAt >= this.options.documentReuseMs) return undefined;
    const head = stream.headSet;
    if (!head || head.seq !== stream.head || now - head.signedAt >= this.options.heartbeatMs / 2 || head.kid !== this.keys.activeKey().kid) return undefined;
    const last = stream.lastAnswer;
    // The same parsed request (the routes keep one object per body) on the same version: the same answer.
    if (last !== undefined && last.request === request && last.version === stream.version && now - last.at < this.options.documentReuseMs) return last.body;
    let from = 0;
    for (const jti of request.ack ?? []) from = Math.max(from, seqOfJti(jti, platformId) ?? 0);
    // peek: no recency bookkeeping on the hot path (the key changes with the stream's version anyway).
    const body = this.answers.peek(`${platformId}:${stream.version}:${from}:${request.maxEvents ?? DEFAULT_MAX_EVENTS}`);
    if (body !== undefined) stream.lastAnswer = { request, version: stream.version, body, at: now };
    return body;
  }

  async poll(platformId: string, request: PollRequest): Promise<Buffer | undefined> {
    const stream = await this.stream(platformId);
    if (!stream) return undefined;
    let from = 0;
    for (const jti of request.ack ?? []) from = Math.max(from, seqOfJti(jti, platformId) ?? 0);
    const max = request.maxEvents ?? DEFAULT_MAX_EVENTS;
    const head = await this.headSet(platformId, stream);
    const key = `${platformId}:${stream.version}:${from}:${max}`;
    const cached = this.answers.get(key);
    if (cached) return cached;
    const pending = stream.sets.filter((s) => s.seq > from);
    const page = max === 0 ? [] : pending.slice(0, max);
    const sets: Record<string, string> = {};
    for (const set of page) sets[set.jti] = set.jws;
    // The head only when the page reaches it: a receiver told "head N" with SETs still to fetch would poll again anyway.
    if (page.length === pending.length) sets[headJti(platformId)] = head;
    const body = Buffer.from(JSON.stringify({ sets, moreAvailable: page.length < pending.length }));
    this.answers.set(key, body);
    return body;
  }

  // --- push ---

  /** A new subscriber: the SETs above its `since` then the head; starts tracking the platform's head. */
  async subscribed(platformId: string, since: number): Promise<string[]> {
    const stream = await this.stream(platformId);
    if (!stream) return [];
    if (!this.pushed.has(platformId)) this.pushed.set(platformId, stream.head);
    const head = await this.headSet(platformId, stream);
    return [...stream.sets.filter((s) => s.seq > since).map((s) => s.jws), head];
  }

  /** Entries were appended for these platforms (here or on another instance, `at` ms): push what is new. */
  notify(platformIds: string[], at?: number): void {
    for (const platformId of platformIds) {
      const stream = this.streams.get(platformId);
      if (stream) stream.checkedAt = 0;
    }
    if (!this.transport) return;
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
        const fresh = stream.sets.filter((s) => s.seq > from);
        for (const set of fresh) this.transport?.publish(platformId, set.jws);
        this.transport?.publish(platformId, await this.headSet(platformId, stream));
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
    if (!this.transport) return;
    for (const platformId of this.transport.subscribedPlatforms()) {
      try {
        const stream = await this.stream(platformId);
        if (stream) this.transport.publish(platformId, await this.headSet(platformId, stream));
      } catch (error) {
        this.onError('revocation_push', error);
      }
    }
  }

  /** Safety net for lost bus messages (Redis restart, no Redis in a test of several processes). */
  private async pollHeads(): Promise<void> {
    if (!this.transport) return;
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
