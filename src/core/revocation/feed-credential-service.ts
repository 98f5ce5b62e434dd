// Who may read a platform's revocation feed: feed credentials, created, listed and
// deleted by the operator (each change one unit of work with its audit event), and the check of a
// presented feed token.
//
// The check never touches the store per request: every instance keeps the SHA-256 of every live feed
// token in memory (at most MAX_PER_PLATFORM per platform, so the index is bounded by what operators
// created, never by what clients send). It is loaded once, reloaded for a platform when the invalidation
// bus says that platform's credentials changed (here or on another instance), fully on a bus reset and
// every REFRESH_MS as a safety net for a lost message. A token of the wrong form, an unknown platform or
// a random token is refused from memory: a flood of them costs no query. A deleted credential is refused
// as soon as the bus notice arrives (the reload is awaited by every check that follows it), and the
// listeners (the WebSocket side) close the sockets that used it.
import { createHash, hash, randomBytes, randomUUID } from 'node:crypto';
import { ServiceError } from '../errors.js';
import { auditEvents, type ChangeBy } from '../audit/events.js';
import type { FeedCredential, FeedCredentialRecord, FeedCredentialStore } from '../ports/feed-credentials.js';
import type { InvalidationBus } from '../ports/invalidation.js';
import type { UnitOfWork } from '../ports/unit-of-work.js';

/** The token's prefix: recognisable in a secret scanner, and a cheap first check. */
export const FEED_TOKEN_PREFIX = 'acef_';
/** `acef_` + 32 random bytes in base64url (43 characters). */
const TOKEN_FORM = /^acef_[A-Za-z0-9_-]{43}$/;
/** Live credentials per platform: enough for a rotation with a few receivers, and it bounds the index. */
export const MAX_PER_PLATFORM = 10;
/** Full reload of the index, in case a bus message was lost (Redis restarted). */
const REFRESH_MS = 60_000;
/** Valid tokens remembered (keyed by the token) until the index changes, so a poll flood hashes each once. */
const VERIFIED_MAX = 1024;

export interface FeedCredentialServicePorts {
  store: FeedCredentialStore;
  uow: UnitOfWork;
  bus: InvalidationBus;
  /** A background reload failed (it is tried again by the next check). */
  onError?: (error: unknown) => void;
}

export interface CreatedFeedCredential {
  credential: FeedCredential;
  /** Shown once, in the admin answer; only its hash is stored. */
  token: string;
}

interface Indexed {
  id: string;
  /** SHA-256 of the token, hex (as stored). */
  hash: string;
}

/**
 * SHA-256 of a feed token, hex: the one-shot crypto.hash where Node has it (20.12+), answering a string (no
 * Hash object, no Buffer made per request).
 */
export const hashFeedToken: (token: string) => string =
  typeof hash === 'function' ? (token) => hash('sha256', token, 'hex') : (token) => createHash('sha256').update(token).digest('hex');

export class FeedCredentialService {
  private readonly store: FeedCredentialStore;
  private readonly uow: UnitOfWork;
  private readonly bus: InvalidationBus;
  private readonly onError: (error: unknown) => void;
  /** platform id -> its live credentials' hashes. Undefined until the first full load. */
  private index: Map<string, Indexed[]> | undefined;
  private loadedAt = 0;
  private full: Promise<void> | undefined;
  /** Platforms whose credentials are being re-read (checks for them wait). */
  private readonly partial = new Map<string, Promise<void>>();
  /**
   * Platforms whose reload after a notice failed (Postgres down), and whether a full reload failed: their
   * credentials are not trusted from memory until a reload succeeds (a check then answers 503).
   */
  private readonly failed = new Set<string>();
  private fullFailed = false;
  /**
   * Tokens that matched, with their credential: emptied whenever the index changes. Only tokens that
   * matched enter (a flood of random tokens cannot fill it); a miss is hashed and its hash compared.
   */
  private readonly verified = new Map<string, { platformId: string; id: string }>();
  private readonly listeners: ((platformId: string | undefined) => void)[] = [];
  /** Bumped by every change of what a check may answer (a reload begun, done or failed). */
  private changes = 0;

  constructor(ports: FeedCredentialServicePorts) {
    ({ store: this.store, uow: this.uow, bus: this.bus } = ports);
    this.onError = ports.onError ?? (() => {});
    this.bus.subscribe((message) => {
      if (message.kind === 'feed_credentials') void this.reloadPlatform(message.platformId).catch(this.onError);
      else if (message.kind === 'all') void this.reloadAll().catch(this.onError);
    });
  }

  // --- the operator's changes ---

  async create(platformId: string, by: ChangeBy): Promise<CreatedFeedCredential> {
    const token = FEED_TOKEN_PREFIX + randomBytes(32).toString('base64url');
    const id = randomUUID();
    const credential = await this.uow.run(async (tx) => {
      const platform = await tx.store.getPlatform(platformId.toLowerCase());
      if (!platform) throw new ServiceError('not_found', 'No platform with this id.');
      // Two creations for one platform queue here, so the cap holds.
      await tx.lock(`feed-credentials:${platform.id}`);
      const existing = await tx.feedCredentials.listFeedCredentials(platform.id);
      if (existing.length >= MAX_PER_PLATFORM) {
        throw new ServiceError('conflict', `A platform has at most ${MAX_PER_PLATFORM} feed credentials: delete one first.`);
      }
      const row: FeedCredentialRecord = { id, platformId: platform.id, createdAt: new Date(), tokenHash: hashFeedToken(token) };
      await tx.feedCredentials.insertFeedCredential(row);
      await tx.audit.insert(auditEvents.adminChange('feed_credential.created', { ...by, platformId: platform.id, feedCredentialId: id }));
      tx.afterCommit(() => this.bus.publish({ kind: 'feed_credentials', platformId: platform.id }));
      return { id, platformId: platform.id, createdAt: row.createdAt };
    });
    return { credential, token };
  }

  async list(platformId: string): Promise<FeedCredential[]> {
    return this.store.listFeedCredentials(platformId.toLowerCase());
  }

  async delete(platformId: string, credentialId: string, by: ChangeBy): Promise<void> {
    const platform = platformId.toLowerCase();
    await this.uow.run(async (tx) => {
      if (!(await tx.feedCredentials.deleteFeedCredential(platform, credentialId.toLowerCase()))) {
        throw new ServiceError('not_found', 'No feed credential with this id on this platform.');
      }
      await tx.audit.insert(auditEvents.adminChange('feed_credential.deleted', { ...by, platformId: platform, feedCredentialId: credentialId.toLowerCase() }));
      tx.afterCommit(() => this.bus.publish({ kind: 'feed_credentials', platformId: platform }));
    });
  }

  // --- the check ---

  /**
   * The id of the platform's credential whose token this is, or undefined. From memory: the store is read
   * only for the first load, after a bus notice (awaited, so a deleted credential is never accepted after
   * its notice arrived) and on the periodic refresh. Throws StoreUnavailableError when that read fails.
   */
  async verify(platformId: string, token: string): Promise<string | undefined> {
    if (!TOKEN_FORM.test(token)) return undefined;
    if (!this.index || this.fullFailed || Date.now() - this.loadedAt > REFRESH_MS) await this.reloadAll();
    const pending = this.partial.get(platformId);
    if (pending) await pending;
    else if (this.failed.has(platformId)) await this.reloadPlatform(platformId);
    return this.match(platformId, token);
  }

  /**
   * The same check without a promise round when the index is current (the poll's hot path): the
   * credential id, null for a refusal, or undefined when a reload is due or running (then call verify).
   */
  verifyNow(platformId: string, token: string): string | null | undefined {
    // A token that matched since the index last changed (only well-formed tokens enter): no regex, no hash.
    const known = this.verified.get(token);
    if (known !== undefined && this.current(platformId)) return known.platformId === platformId ? known.id : null;
    if (!TOKEN_FORM.test(token)) return null;
    if (!this.current(platformId)) return undefined;
    // Not among the remembered tokens (looked up above): hashed and compared.
    return this.matchHash(platformId, token) ?? null;
  }

  /** Whether the index may answer for this platform now (loaded, fresh, not being re-read, not failed). */
  private current(platformId: string): boolean {
    return this.index !== undefined && !this.fullFailed && Date.now() - this.loadedAt <= REFRESH_MS && !this.partial.has(platformId) && !this.failed.has(platformId);
  }

  /**
   * A number that changes whenever a check's answer may change: a verdict taken under one generation may
   * be reused for the same request while the generation is the same (the poll's headers and body).
   */
  get generation(): number {
    return this.changes;
  }

  private match(platformId: string, token: string): string | undefined {
    const known = this.verified.get(token);
    if (known) return known.platformId === platformId ? known.id : undefined;
    return this.matchHash(platformId, token);
  }

  private matchHash(platformId: string, token: string): string | undefined {
    const candidates = this.index?.get(platformId);
    if (!candidates) return undefined;
    const presented = hashFeedToken(token);
    let found: string | undefined;
    // Hashes are compared, not tokens: how long a comparison of SHA-256 outputs takes tells nothing about a
    // token (nobody can choose a token whose hash shares a prefix with a live one), so string equality is
    // enough; every candidate is still compared (no early exit on a match).
    for (const candidate of candidates) if (candidate.hash === presented) found = candidate.id;
    if (found !== undefined) {
      if (this.verified.size >= VERIFIED_MAX) this.verified.clear();
      this.verified.set(token, { platformId, id: found });
    }
    return found;
  }

  /** Whether this credential is still live (the WebSocket side checks its sockets after a change). */
  isLive(platformId: string, credentialId: string): boolean {
    return this.index?.get(platformId)?.some((c) => c.id === credentialId) ?? false;
  }

  /** Whether the platform has a live credential (after its last one is deleted, its feed answers are released). */
  hasCredentials(platformId: string): boolean {
    return (this.index?.get(platformId)?.length ?? 0) > 0;
  }

  /** Called after a reload: with the platform whose credentials changed, or undefined after a full reload. */
  onChange(listener: (platformId: string | undefined) => void): void {
    this.listeners.push(listener);
  }

  private reloadAll(): Promise<void> {
    this.full ??= (async () => {
      this.changes++;
      let rows: FeedCredentialRecord[];
      try {
        rows = await this.store.allFeedCredentials();
      } catch (error) {
        this.fullFailed = true;
        this.changes++;
        throw error;
      }
      this.fullFailed = false;
      this.failed.clear();
      const next = new Map<string, Indexed[]>();
      for (const row of rows) next.set(row.platformId, [...(next.get(row.platformId) ?? []), { id: row.id, hash: row.tokenHash.toLowerCase() }]);
      this.index = next;
      this.changes++;
      this.verified.clear();
      this.loadedAt = Date.now();
      this.emit(undefined);
    })().finally(() => (this.full = undefined));
    return this.full;
  }

  private reloadPlatform(platformId: string): Promise<void> {
    if (!this.index) return this.reloadAll();
    // Chained after a running reload of the same platform: the last notice always gets a read after it.
    const previous = this.partial.get(platformId) ?? Promise.resolve();
    const read = async () => {
      let rows: FeedCredentialRecord[];
      try {
        rows = await this.store.feedCredentialsOf(platformId);
      } catch (error) {
        this.failed.add(platformId);
        this.changes++;
        throw error;
      }
      this.failed.delete(platformId);
      this.setPlatform(platformId, rows);
    };
    // After the previous read whatever its outcome (its failure reached its own callers).
    const next: Promise<void> = previous
      .then(read, read)
      .finally(() => {
        if (this.partial.get(platformId) === next) this.partial.delete(platformId);
      });
    this.partial.set(platformId, next);
    this.changes++;
    return next;
  }

  private setPlatform(platformId: string, rows: FeedCredentialRecord[]): void {
    if (!this.index) return;
    this.changes++;
    this.verified.clear();
    if (rows.length === 0) this.index.delete(platformId);
    else this.index.set(platformId, rows.map((row) => ({ id: row.id, hash: row.tokenHash.toLowerCase() })));
    this.emit(platformId);
  }

  private emit(platformId: string | undefined): void {
    for (const listener of this.listeners) {
      try {
        listener(platformId);
      } catch (error) {
        this.onError(error);
      }
    }
  }
}
