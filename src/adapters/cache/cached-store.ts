// Read-through caching in front of a Store: in-process (L1) then Redis (L2, when configured) then the
// inner store. Records change only in a unit of work, which this store wraps (see `unitOfWork`): after its
// commit, each write deletes the Redis entries it touched and publishes an invalidation that every
// instance (this one included) applies to its in-process cache.
//
// The Redis layer is used only while it is trusted. A Redis cache command that fails (a delete that may
// not have happened, a write that may land late) and anything that may have rolled Redis back or lost
// messages (a reconnect, a promoted replica, a Cluster node lost) make it untrusted: this process then
// neither reads nor fills it, and drops its in-process entries, until it has swept every cache key from
// every master. So an entry a failed delete should have removed is never served from here, and an
// instance that comes back from a failover re-reads Postgres before it trusts Redis again.
import { withDeadline } from '../../core/support/deadline.js';
import { sweepKeys, untilReadyOr, watchResets, type RedisClient } from './redis.js';
import type { CacheMetrics } from './cache-metrics.js';
import { WriteDeadlineError } from '../../core/errors.js';
import type { AgentCredentials, AgentView, PlatformRecord } from '../../core/model.js';
import type { LockOptions, Store } from '../../core/ports/store.js';
import type { Invalidation, InvalidationBus } from '../../core/ports/invalidation.js';
import type { AdminWrites, Transaction, UnitOfWork } from '../../core/ports/unit-of-work.js';
import { BoundedCache } from '../../core/support/bounded-cache.js';

export interface CachedStoreOptions {
  /** The store read through on a miss (Postgres); its unit of work is the one wrapped. */
  inner: Store;
  /** The L2 client; none: in-process caching only. */
  redis: RedisClient | undefined;
  keyPrefix: string;
  redisTtlSeconds: number;
  localTtlMs: number;
  localMaxEntries: number;
  bus: InvalidationBus;
  metrics: CacheMetrics;
  /** Told when the Redis layer stops or resumes being used, and why (no key or value is passed). */
  onTrust?: (trusted: boolean, why: string) => void;
}

/** A second Redis delete shortly after a write closes the race with a reader that loaded the old row. */
const SECOND_DELETE_MS = 750;
/**
 * How long an admin write's answer waits on its Redis deletes after the commit. Past it the delete counts as
 * failed (Redis distrusted: reads go to Postgres until a sweep), and goes on in the background: a Cluster node
 * that black-holes keeps its commands queued for seconds, and the write is already durable.
 */
export const EFFECT_BOUND_MS = 1000;
/** Redis keys deleted per SCAN/UNLINK round when everything is dropped. */
const SCAN_COUNT = 1000;

/** Wait between sweep attempts while Redis answers but the sweep fails (a node still failing over). */
const SWEEP_RETRY_MS = 250;

export class CachedStore implements Store {
  private readonly inner: Store;
  private readonly options: Omit<CachedStoreOptions, 'inner'>;
  private readonly views: BoundedCache<AgentView | null>;
  private readonly platforms: BoundedCache<PlatformRecord | null>;
  /** Redis (L2) is read and filled only while true; see the file's header. */
  private redisTrusted = true;
  /** Bumped by every distrust: a sweep that started before one does not restore trust. */
  private distrusts = 0;
  private resyncing: Promise<void> | undefined;
  /** Reads out to Redis or Postgres, by Redis key, with the cache's generation when each began (single flight). */
  private readonly flights = new Map<string, { generation: number; read: Promise<unknown> }>();
  private closed = false;

  constructor({ inner, ...options }: CachedStoreOptions) {
    this.inner = inner;
    this.options = options;
    this.views = new BoundedCache({ maxEntries: options.localMaxEntries, ttlMs: options.localTtlMs });
    this.platforms = new BoundedCache({ maxEntries: Math.min(options.localMaxEntries, 10_000), ttlMs: options.localTtlMs });
    options.bus.subscribe((message) => this.applyInvalidation(message));
    if (options.redis) options.metrics.setRedisCacheTrusted(true);
    else options.metrics.noRedisCache();
    if (options.redis) watchResets(options.redis, (why) => this.distrust(true, why));
  }

  /** Is the Redis layer in use right now (for tests and /readyz)? */
  get redisCacheTrusted(): boolean {
    return this.options.redis !== undefined && this.redisTrusted;
  }

  /**
   * Stops using Redis until a full sweep succeeds. `dropLocal`: what this process cached may also be
   * stale (a reconnect: invalidations may have been missed).
   */
  private distrust(dropLocal: boolean, why: string): void {
    this.distrusts++;
    if (dropLocal) this.applyInvalidation({ kind: 'all' });
    if (this.redisTrusted) {
      this.redisTrusted = false;
      this.options.metrics.setRedisCacheTrusted(false);
      this.options.onTrust?.(false, why);
    }
    this.resyncing ??= this.resync().finally(() => (this.resyncing = undefined));
  }

  private redisFailed(operation: 'cache_get' | 'cache_set' | 'cache_delete'): void {
    this.options.metrics.redisFailed(operation);
    this.distrust(false, `${operation} failed`);
  }

  /** Sweeps every cache key until one sweep completes with no distrust during it; then trusts Redis again. */
  private async resync(): Promise<void> {
    const redis = this.options.redis!;
    while (!this.closed && !this.redisTrusted) {
      if (redis.status !== 'ready') {
        // Wait for Redis to answer again (bounded: status changes can come without a 'ready' in a Cluster).
        await untilReadyOr(redis, 1000);
        continue;
      }
      const seen = this.distrusts;
      try {
        await sweepKeys(redis, `${globEscape(this.options.keyPrefix)}*`, SCAN_COUNT);
      } catch {
        this.options.metrics.redisFailed('cache_sweep');
        await new Promise((r) => setTimeout(r, SWEEP_RETRY_MS).unref());
        continue;
      }
      if (seen === this.distrusts) {
        this.redisTrusted = true;
        this.options.metrics.setRedisCacheTrusted(true);
        this.options.onTrust?.(true, 'swept');
      }
    }
  }

  private viewKey(apiKeyId: string) {
    return `${this.options.keyPrefix}agent:${apiKeyId}`;
  }

  private platformKey(platformId: string) {
    return `${this.options.keyPrefix}platform:${platformId}`;
  }

  private applyInvalidation(message: Invalidation): void {
    switch (message.kind) {
      case 'agent':
        this.views.delete(message.apiKeyId);
        break;
      case 'agents':
        for (const id of message.apiKeyIds) this.views.delete(id);
        break;
      case 'platform':
        this.platforms.delete(message.platformId);
        this.views.deleteWhere((_, view) => view !== null && message.platformId in view.grants);
        break;
      case 'all':
        this.views.clear();
        this.platforms.clear();
        break;
      case 'keys':
        break;
    }
  }

  /**
   * L1 → L2 → inner, filling the layers on the way back. Negative answers are kept in L1 only. Single
   * flight: a read that misses L1 while another read of the same entry is out, with no invalidation of the
   * cache since that one began, waits for its answer instead of asking Redis (and Postgres) again.
   */
  private readThrough<V extends object>(
    local: BoundedCache<V | null>,
    id: string,
    redisKey: string,
    load: () => Promise<V | null>,
  ): Promise<V | null> {
    const cached = local.get(id);
    this.options.metrics.cache('local', cached !== undefined);
    if (cached !== undefined) return Promise.resolve(cached);
    const generation = local.generation;
    const flight = this.flights.get(redisKey);
    // An invalidation since it began (any: the generation counts them all) may have made its answer stale.
    if (flight && flight.generation === generation) return flight.read as Promise<V | null>;
    const read = this.refill(local, id, redisKey, load, generation).finally(() => {
      if (this.flights.get(redisKey)?.read === read) this.flights.delete(redisKey);
    });
    this.flights.set(redisKey, { generation, read });
    return read;
  }

  private async refill<V extends object>(
    local: BoundedCache<V | null>,
    id: string,
    redisKey: string,
    load: () => Promise<V | null>,
    generation: number,
  ): Promise<V | null> {
    const { redis } = this.options;
    if (redis && this.redisTrusted) {
      const distrusts = this.distrusts;
      const raw = await redis.get(redisKey).catch(() => {
        this.redisFailed('cache_get');
        return null;
      });
      this.options.metrics.cache('redis', raw !== null);
      // Trust lost while the GET was out: its answer may be the very entry a failed delete left.
      if (raw !== null && distrusts === this.distrusts) {
        const value = JSON.parse(raw) as V;
        local.set(id, value, generation);
        return value;
      }
    }
    const value = await load();
    this.fill(local, id, redisKey, value, generation);
    return value;
  }

  /** Caches a value read from the inner store, unless an invalidation came after `generation` was read. */
  private fill<V extends object>(local: BoundedCache<V | null>, id: string, redisKey: string, value: V | null, generation: number): void {
    local.set(id, value, generation);
    const { redis } = this.options;
    if (redis && this.redisTrusted && value !== null && local.generation === generation) {
      redis.set(redisKey, JSON.stringify(value), 'EX', this.options.redisTtlSeconds).catch(() => this.redisFailed('cache_set'));
    }
  }

  /**
   * With `alreadyRead` (the credentials a cold check just verified): their view, when the in-process cache
   * would still serve an entry read at the same moment (no invalidation has reached this process since,
   * younger than the cache's TTL, the safety net behind pub/sub), so it is exactly as current as a cached
   * view; it is then cached. That spares the cold path a Redis read and a query. Otherwise the usual
   * read-through.
   */
  getAgentView(apiKeyId: string, alreadyRead?: AgentCredentials): Promise<AgentView | null> {
    const stamp = alreadyRead?.cacheStamp;
    const { localMaxEntries, localTtlMs } = this.options;
    if (
      stamp &&
      stamp.generation === this.views.generation &&
      localMaxEntries > 0 &&
      Date.now() - stamp.at < localTtlMs &&
      alreadyRead.view.apiKeyId === apiKeyId
    ) {
      this.fill(this.views, apiKeyId, this.viewKey(apiKeyId), alreadyRead.view, stamp.generation);
      return Promise.resolve(alreadyRead.view);
    }
    return this.readThrough(this.views, apiKeyId, this.viewKey(apiKeyId), () => this.inner.getAgentView(apiKeyId));
  }

  getPlatform(platformId: string): Promise<PlatformRecord | null> {
    return this.readThrough(this.platforms, platformId, this.platformKey(platformId), () => this.inner.getPlatform(platformId)).then(withResources);
  }

  // Secret hashes are never cached (docs/decisions.md: never in Redis in any form).
  getSecretHashes(apiKeyId: string) {
    return this.inner.getSecretHashes(apiKeyId);
  }

  /** Never cached either; stamped with the view cache's invalidation count and the time, before the query. */
  async getAgentCredentials(apiKeyId: string): Promise<AgentCredentials | null> {
    const cacheStamp = { generation: this.views.generation, at: Date.now() };
    const found = await this.inner.getAgentCredentials(apiKeyId);
    return found && { ...found, cacheStamp };
  }

  /**
   * Deletes cache entries, one key per DEL (a Cluster refuses multi-key commands across slots; auto-
   * pipelining sends them together). A delete that fails distrusts Redis (see the header): the sweep that
   * restores trust removes the entry it should have removed. Attempted even while distrusted, so other
   * instances stop seeing the entry as soon as possible.
   */
  private async deleteRedis(keys: string[]): Promise<void> {
    const { redis } = this.options;
    if (!redis || keys.length === 0) return;
    const remove = async () => {
      const results = await Promise.allSettled(keys.map((key) => redis.del(key)));
      if (results.some((r) => r.status === 'rejected')) this.redisFailed('cache_delete');
    };
    if (!(await withinBound(remove(), EFFECT_BOUND_MS))) this.redisFailed('cache_delete');
    setTimeout(() => void remove(), SECOND_DELETE_MS).unref();
  }

  /**
   * Drops everything cached, here, in Redis and (through the bus) in every instance, the verified-secret
   * memory included. For a write whose outcome is unknown: it may have been applied, and which keys it
   * touched cannot be trusted either.
   */
  private async invalidateEverything(): Promise<void> {
    const { redis } = this.options;
    if (redis) {
      await sweepKeys(redis, `${globEscape(this.options.keyPrefix)}*`, SCAN_COUNT).catch(() => this.redisFailed('cache_delete'));
    }
    await this.options.bus.publish({ kind: 'all' });
  }

  /**
   * Runs a unit of work. When its outcome is unknown (WriteDeadlineError), everything is invalidated at
   * once, again once the driver learns the outcome, and again a moment later (a reader may have loaded
   * the old row in between): the token path never disagrees with Postgres for long after a stall ends.
   */
  private async writing<T>(write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (error) {
      if (error instanceof WriteDeadlineError) {
        const again = () => void this.invalidateEverything();
        await this.invalidateEverything();
        void error.settled.then(again);
        setTimeout(again, SECOND_DELETE_MS).unref();
        void error.settled.then(() => setTimeout(again, SECOND_DELETE_MS).unref());
      }
      throw error;
    }
  }

  private async invalidateAgents(apiKeyIds: string[]): Promise<void> {
    await this.deleteRedis(apiKeyIds.map((id) => this.viewKey(id)));
    await this.options.bus.publish(apiKeyIds.length === 1 ? { kind: 'agent', apiKeyId: apiKeyIds[0] } : { kind: 'agents', apiKeyIds });
  }

  /**
   * Wraps a unit of work so that its writes drop what they change from the caches, after the commit
   * only (a rolled-back change leaves the caches as they are); an unknown outcome drops everything (see
   * `writing`). Reads inside the unit of work go to the transaction, never to a cache.
   */
  unitOfWork(inner: UnitOfWork): UnitOfWork {
    return {
      run: <T>(fn: (tx: Transaction) => Promise<T>) => this.writing(() => inner.run((tx) => fn({ ...tx, store: this.invalidating(tx) }))),
    };
  }

  /** The transaction's admin writes, each queueing its cache drop for after the commit. */
  private invalidating(tx: Transaction): AdminWrites {
    const { store } = tx;
    const agentsAfterCommit = (apiKeyIds: string[]) => tx.afterCommit(() => this.invalidateAgents(apiKeyIds));
    const agentOf = async (agentId: string) => {
      const agent = await store.getAgent(agentId);
      if (agent) agentsAfterCommit([agent.apiKeyId]);
    };
    return {
      getPlatform: (platformId) => store.getPlatform(platformId),
      apiKeyIdsOnPlatform: (platformId) => store.apiKeyIdsOnPlatform(platformId),
      getAgent: (agentId) => store.getAgent(agentId),
      listGrants: (agentId) => store.listGrants(agentId),
      createPlatform: async (input) => {
        const platform = await store.createPlatform(input);
        tx.afterCommit(() => this.options.bus.publish({ kind: 'platform', platformId: platform.id }));
        return platform;
      },
      updatePlatform: async (platformId, patch) => {
        const platform = await store.updatePlatform(platformId, patch);
        if (platform) {
          const apiKeyIds = await store.apiKeyIdsOnPlatform(platformId);
          tx.afterCommit(async () => {
            await this.deleteRedis([this.platformKey(platformId), ...apiKeyIds.map((id) => this.viewKey(id))]);
            await this.options.bus.publish({ kind: 'platform', platformId });
          });
        }
        return platform;
      },
      createAgent: async (input) => {
        const agent = await store.createAgent(input);
        agentsAfterCommit([agent.apiKeyId]); // drops a negative L1 entry, if any
        return agent;
      },
      updateAgent: async (agentId, patch) => {
        const agent = await store.updateAgent(agentId, patch);
        if (agent) agentsAfterCommit([agent.apiKeyId]);
        return agent;
      },
      rotateSecret: async (agentId, secretHash, previousValidUntil) => {
        const agent = await store.rotateSecret(agentId, secretHash, previousValidUntil);
        if (agent) agentsAfterCommit([agent.apiKeyId]);
        return agent;
      },
      putGrant: async (agentId, platformId, scopes) => {
        const grant = await store.putGrant(agentId, platformId, scopes);
        await agentOf(agentId);
        return grant;
      },
      deleteGrant: async (agentId, platformId) => {
        const deleted = await store.deleteGrant(agentId, platformId);
        await agentOf(agentId);
        return deleted;
      },
    };
  }

  listPlatforms() {
    return this.inner.listPlatforms();
  }

  getAgent(agentId: string) {
    return this.inner.getAgent(agentId);
  }

  listAgents() {
    return this.inner.listAgents();
  }

  listGrants(agentId: string) {
    return this.inner.listGrants(agentId);
  }

  listSigningKeys() {
    return this.inner.listSigningKeys();
  }

  async withLock<T>(lock: string, wait: boolean, fn: Parameters<Store['withLock']>[2], options?: LockOptions) {
    return this.inner.withLock<T>(lock, wait, fn as never, options);
  }

  ping() {
    return this.inner.ping();
  }

  async close() {
    this.closed = true;
    await this.options.bus.close();
    await this.inner.close();
  }
}

/** SCAN MATCH treats * ? [ ] \ as pattern characters: a key prefix holding them is matched literally. */
function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/** A record Redis kept from before platforms had `resources` (it expires with its TTL) reads as having none. */
function withResources(platform: PlatformRecord | null): PlatformRecord | null {
  return platform && !Array.isArray(platform.resources) ? { ...platform, resources: [] } : platform;
}

/** true when `work` settled within `ms`; it goes on either way (its own failure handling applies). */
export function withinBound(work: Promise<unknown>, ms: number): Promise<boolean> {
  return withDeadline(work.then(() => true, () => true), ms);
}
