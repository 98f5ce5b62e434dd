// The revocation feed as a transport: the platform's live entries served as a signed document (for polling
// and catch-up) and pushed to connected subscribers. The entries come from the revocation log (core); the
// transport (uWS topics) is given by revocation-routes.ts.
import { importPKCS8, SignJWT } from 'jose';
import type { KeyManager } from '../../core/keys/key-manager.js';
import type { InvalidationBus } from '../../core/ports/invalidation.js';
import { BoundedCache } from '../../core/support/bounded-cache.js';
import { strongEtag } from '../../core/support/etag.js';
import type { RevocationEntry, RevocationStore } from '../../core/ports/revocation-log.js';
import { FEED_TYP, type FeedEntry, type FeedPayload } from '@agent-credential-exchange/middleware/feed-document';

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
  /** How long a signed document is reused for the same (platform, since, head). */
  documentReuseMs: number;
}

const SINCE_STEP = 16;

export interface SignedDocument {
  body: string;
  etag: string;
  seq: number;
}

export class RevocationFeed {
  private readonly documents: BoundedCache<SignedDocument>;
  private readonly known = new BoundedCache<true>(10_000, 5000);
  private readonly signingKeys = new Map<string, ReturnType<typeof importPKCS8>>();
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
    this.documents = new BoundedCache<SignedDocument>(10_000, options.documentReuseMs);
    options.bus.subscribe((message) => {
      if (message.kind === 'revocation') this.notify(message.platformIds, message.at);
      // After a Redis reconnect messages may be lost: compare every subscribed head with the database.
      else if (message.kind === 'all') void this.pollHeads();
    });
  }

  attach(transport: FeedTransport): void {
    this.transport = transport;
  }

  start(): void {
    this.timers.push(setInterval(() => void this.pollHeads(), this.options.pollMs));
    this.timers.push(setInterval(() => void this.purge(), 30_000));
    this.timers.forEach((t) => t.unref());
    void this.purge();
  }

  stop(): void {
    this.timers.forEach(clearInterval);
    this.timers = [];
  }

  // --- the signed document ---

  /** The platform's live entries above `since`, signed; reused briefly for identical requests. */
  async document(platformId: string, since: number): Promise<SignedDocument> {
    // The endpoint is public and a signature costs CPU: answer from a coarse starting point, so one
    // platform head has at most head/16 + 2 distinct documents (each reused for documentReuseMs). A reader
    // may receive entries it already holds; applying them again changes nothing.
    const from = Math.floor(since / SINCE_STEP) * SINCE_STEP;
    const { head, entries } = await this.store.since(platformId, from, new Date());
    if (since >= head) return this.sign(platformId, head, head, []);
    return this.sign(platformId, from, head, entries);
  }

  /** Positive answers are remembered briefly: a reconnect storm of subscribers costs one query per platform. */
  async platformExists(platformId: string): Promise<boolean> {
    if (this.known.get(platformId)) return true;
    const exists = await this.store.platformExists(platformId);
    if (exists) this.known.set(platformId, true);
    return exists;
  }

  private async sign(platformId: string, since: number, head: number, entries: RevocationEntry[]): Promise<SignedDocument> {
    const active = this.keys.activeKey();
    const cacheKey = `${platformId}:${since}:${head}:${active.kid}`;
    const cached = this.documents.get(cacheKey);
    if (cached) return cached;
    let key = this.signingKeys.get(active.kid);
    if (!key) {
      key = importPKCS8(active.privateKeyPem, 'RS256');
      this.signingKeys.set(active.kid, key);
    }
    const payload: FeedPayload = {
      iss: this.options.issuer,
      platform_id: platformId,
      since,
      seq: head,
      iat: Math.floor(Date.now() / 1000),
      entries: entries.map(presentEntry),
    };
    const body = await new SignJWT(payload as unknown as Record<string, unknown>)
      .setProtectedHeader({ alg: 'RS256', kid: active.kid, typ: FEED_TYP })
      .sign(await key);
    const document = { body, etag: strongEtag(body), seq: head };
    this.documents.set(cacheKey, document);
    return document;
  }

  // --- push ---

  /** A new subscriber: the catch-up document from its `since`; starts tracking the platform's head. */
  async subscribed(platformId: string, since: number): Promise<SignedDocument> {
    const document = await this.document(platformId, since);
    if (!this.pushed.has(platformId)) this.pushed.set(platformId, document.seq);
    return document;
  }

  /** Entries were appended for these platforms (here or on another instance, `at` ms): push what is new. */
  notify(platformIds: string[], at?: number): void {
    if (!this.transport) return;
    const subscribed = new Set(this.transport.subscribedPlatforms());
    for (const platformId of platformIds) if (subscribed.has(platformId)) this.push(platformId, at);
  }

  private push(platformId: string, at?: number): void {
    const previous = this.pushing.get(platformId) ?? Promise.resolve();
    const next = previous
      .then(async () => {
        const from = this.pushed.get(platformId) ?? 0;
        const { head, entries } = await this.store.since(platformId, from, new Date());
        if (head <= from) return;
        const document = await this.sign(platformId, from, head, entries);
        this.transport?.publish(platformId, document.body);
        this.pushed.set(platformId, head);
        const now = Date.now();
        // Publish-to-send: from the admin write (bus message time, else the entry's creation) to this send.
        for (const entry of entries) this.metrics.published(Math.max(0, now - (at ?? entry.createdAt.getTime())) / 1000);
      })
      .catch((error) => this.onError('revocation_push', error))
      .finally(() => {
        if (this.pushing.get(platformId) === next) this.pushing.delete(platformId);
      });
    this.pushing.set(platformId, next);
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

function presentEntry(entry: RevocationEntry): FeedEntry {
  const expires_at = Math.floor(entry.expiresAt.getTime() / 1000);
  if (entry.kind === 'agent') return { seq: entry.seq, type: 'agent', agent_id: entry.agentId!, iat_max: entry.iatMax!, expires_at };
  if (entry.kind === 'platform') return { seq: entry.seq, type: 'platform', iat_max: entry.iatMax!, expires_at };
  return { seq: entry.seq, type: 'key', kid: entry.kid!, expires_at };
}
