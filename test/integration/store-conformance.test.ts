// The Store conformance suite against each implementation: Postgres, PGlite (the embedded default), and the
// cached store with Redis and with its in-process cache only, each writing through its unit of work as the
// service does (the cached store's wrapping it, so its invalidations are the ones under test). Two cached stores over one database play two
// instances, so invalidation bugs show up where they live. The audit trail's and the revocation feed's
// stores (Postgres only, no cache) run their own suites against Postgres and PGlite, and so do the records of used
// assertion jtis (Postgres, PGlite, Redis, and the two-record guard the service composes over Postgres and Redis).
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import type { Sql } from 'postgres';
import { connectPostgres } from '../../src/adapters/postgres/connect.js';
import { PostgresStore } from '../../src/adapters/postgres/postgres-store.js';
import { PostgresUnitOfWork } from '../../src/adapters/postgres/unit-of-work.js';
import { migrate } from '../../src/adapters/postgres/migrate.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/adapters/postgres/embedded/pglite-server.js';
import { CachedStore } from '../../src/adapters/cache/cached-store.js';
import { LocalBus, RedisBus } from '../../src/adapters/cache/invalidation-bus.js';
import type { InvalidationBus } from '../../src/core/ports/invalidation.js';
import { closeRedis, connectRedis } from '../../src/adapters/cache/redis.js';
import client from 'prom-client';
import { CacheMetrics } from '../../src/adapters/cache/cache-metrics.js';
import type { Store } from '../../src/core/ports/store.js';
import { createDatabase, REDIS_URL, type TestDatabase } from '../support/service.js';
import { storeConformance, type StoreUnderTest } from '../support/store-conformance.js';
import { auditStoreConformance, type AuditStoreUnderTest } from '../support/audit-store-conformance.js';
import { revocationStoreConformance, type RevocationStoreUnderTest } from '../support/revocation-store-conformance.js';
import { MAINTENANCE_LOCK, PostgresAuditStore } from '../../src/adapters/postgres/audit-store.js';
import { PostgresRevocationStore } from '../../src/adapters/postgres/revocation-store.js';
import { PostgresFeedCredentialStore } from '../../src/adapters/postgres/feed-credential-store.js';
import { feedCredentialStoreConformance, type FeedCredentialStoreUnderTest } from '../support/feed-credential-store-conformance.js';
import { replayGuardConformance, type ReplayGuardUnderTest } from '../support/replay-guard-conformance.js';
import { PostgresReplayGuard } from '../../src/adapters/postgres/used-jtis.js';
import { RedisReplayGuard } from '../../src/adapters/cache/replay-guard.js';
import { EitherRecordReplayGuard } from '../../src/core/credentials/replay-record.js';

const TIMEOUT_MS = 5000;

/** A failed after-commit effect (a cache drop) fails the write that queued it, so the test sees it. */
const unitOfWork = (store: PostgresStore) =>
  new PostgresUnitOfWork({
    store,
    recordAudit: false,
    onEffectFailure: (error) => {
      throw error;
    },
  });

async function postgresStore(url: string, poolSize = 4): Promise<{ store: PostgresStore; uow: PostgresUnitOfWork; sql: Sql }> {
  const sql = connectPostgres({ url, poolSize, timeoutMs: TIMEOUT_MS });
  await migrate(sql);
  const store = new PostgresStore({ sql, timeoutMs: TIMEOUT_MS });
  return { store, uow: unitOfWork(store), sql };
}

/** An embedded PGlite in a fresh directory; `stop` also removes the directory. */
async function embeddedDatabase(): Promise<{ url: string; stop: () => Promise<void> }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ace-store-'));
  const embedded: EmbeddedPostgres = await startEmbeddedPostgres(dir);
  return {
    url: embedded.url,
    stop: async () => {
      await embedded.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function cached(inner: Store, bus: InvalidationBus, redis: Redis | undefined, keyPrefix: string): CachedStore {
  return new CachedStore({ inner, redis, keyPrefix, redisTtlSeconds: 300, localTtlMs: 60_000, localMaxEntries: 1000, bus, metrics: new CacheMetrics({ registry: new client.Registry() }) });
}

describe('Store conformance: Postgres', () => {
  let db: TestDatabase;
  let subject: StoreUnderTest;
  beforeAll(async () => {
    db = await createDatabase();
    const { store, uow } = await postgresStore(db.url);
    subject = { store, peer: store, uow, concurrentSessions: true };
  });
  afterAll(async () => {
    await subject?.store.close();
    await db?.drop();
  });
  storeConformance(() => subject);
});

describe('Store conformance: PGlite (embedded default)', () => {
  let embedded: Awaited<ReturnType<typeof embeddedDatabase>>;
  let subject: StoreUnderTest;
  beforeAll(async () => {
    embedded = await embeddedDatabase();
    const { store, uow } = await postgresStore(embedded.url, 1);
    // The embedded default runs the cached store with an in-process bus and no Redis.
    const bus = new LocalBus();
    const view = cached(store, bus, undefined, 'ace:c:');
    subject = { store: view, peer: view, uow: view.unitOfWork(uow), concurrentSessions: false };
  });
  afterAll(async () => {
    await subject?.store.close();
    await embedded?.stop();
  });
  storeConformance(() => subject);
});

describe('Store conformance: cached store over Postgres + Redis, two instances', () => {
  let db: TestDatabase;
  const connections: Redis[] = [];
  const closers: (() => Promise<void>)[] = [];
  let subject: StoreUnderTest;
  beforeAll(async () => {
    db = await createDatabase();
    const prefix = `ace_conf_${randomBytes(4).toString('hex')}:`;
    const instance = async () => {
      const { store, uow } = await postgresStore(db.url);
      closers.push(() => store.close());
      const redis = connectRedis(REDIS_URL, 1000) as Redis;
      const subscriber = connectRedis(REDIS_URL, 1000) as Redis;
      connections.push(redis, subscriber);
      const bus = new RedisBus({ publisher: redis as Redis, subscriber: subscriber as Redis, channel: `${prefix}invalidate` });
      const view = cached(store, bus, redis as Redis, `${prefix}c:`);
      return { view, uow: view.unitOfWork(uow) };
    };
    const [one, two] = [await instance(), await instance()];
    subject = { store: one.view, peer: two.view, uow: one.uow, concurrentSessions: true };
    // Both buses must be subscribed before the first write, or its invalidation would reach nobody.
    const deadline = Date.now() + 10_000;
    for (;;) {
      const [, subscribers] = (await connections[0].pubsub('NUMSUB', `${prefix}invalidate`)) as [string, number];
      if (Number(subscribers) >= 2) break;
      if (Date.now() > deadline) throw new Error('invalidation buses did not subscribe');
      await new Promise((r) => setTimeout(r, 20));
    }
  });
  afterAll(async () => {
    for (const close of closers) await close();
    for (const c of connections) closeRedis(c);
    await db?.drop();
  });
  storeConformance(() => subject);
});

/**
 * The audit and revocation stores over one database, migrated here, wired as the service does: the feed on
 * the main pool, the trail on a pool of its own.
 */
async function recordStores(url: string, poolSize: number, concurrentSessions: boolean) {
  const main = connectPostgres({ url, poolSize, timeoutMs: TIMEOUT_MS });
  await migrate(main);
  const openAudit = () => new PostgresAuditStore({ sql: connectPostgres({ url, poolSize, timeoutMs: TIMEOUT_MS }), readTimeoutMs: TIMEOUT_MS });
  const audit: AuditStoreUnderTest = {
    store: openAudit(),
    open: openAudit,
    holdMaintenanceLock: concurrentSessions
      ? (during) => main.begin(async (tx) => {
          await tx`SELECT pg_advisory_xact_lock(hashtext(${MAINTENANCE_LOCK}))`;
          await during();
        })
      : undefined,
  };
  const uow = unitOfWork(new PostgresStore({ sql: main, timeoutMs: TIMEOUT_MS }));
  const revocation: RevocationStoreUnderTest = { revocations: new PostgresRevocationStore({ sql: main, timeoutMs: TIMEOUT_MS }), uow };
  const feed: FeedCredentialStoreUnderTest = { reads: new PostgresFeedCredentialStore({ sql: main, timeoutMs: TIMEOUT_MS }), uow };
  return {
    audit,
    revocation,
    feed,
    async close() {
      await audit.store.close();
      await main.end({ timeout: 2 });
    },
  };
}

describe('Audit and revocation store conformance: Postgres', () => {
  let db: TestDatabase;
  let stores: Awaited<ReturnType<typeof recordStores>>;
  beforeAll(async () => {
    db = await createDatabase();
    stores = await recordStores(db.url, 4, true);
  });
  afterAll(async () => {
    await stores?.close();
    await db?.drop();
  });
  auditStoreConformance(() => stores.audit);
  revocationStoreConformance(() => stores.revocation);
  describe('feed credentials', () => feedCredentialStoreConformance(() => stores.feed));
});

describe('Audit and revocation store conformance: PGlite (embedded default)', () => {
  let embedded: Awaited<ReturnType<typeof embeddedDatabase>>;
  let stores: Awaited<ReturnType<typeof recordStores>>;
  beforeAll(async () => {
    embedded = await embeddedDatabase();
    stores = await recordStores(embedded.url, 1, false);
  });
  afterAll(async () => {
    await stores?.close();
    await embedded?.stop();
  });
  auditStoreConformance(() => stores.audit);
  revocationStoreConformance(() => stores.revocation);
  describe('feed credentials', () => feedCredentialStoreConformance(() => stores.feed));
});

/** The used-jti records over one database (migrated here), a second pool playing another instance. */
async function jtiRecords(url: string, poolSize: number) {
  const pools = [connectPostgres({ url, poolSize, timeoutMs: TIMEOUT_MS }), connectPostgres({ url, poolSize, timeoutMs: TIMEOUT_MS })];
  await migrate(pools[0]);
  const [one, two] = pools.map((sql) => new PostgresReplayGuard({ sql, timeoutMs: TIMEOUT_MS }));
  return { one, two, sql: pools[0], close: () => Promise.all(pools.map((sql) => sql.end({ timeout: 2 }))) };
}

describe('Used assertion jtis: Postgres, Redis, and both', () => {
  let db: TestDatabase;
  let records: Awaited<ReturnType<typeof jtiRecords>>;
  const connections: Redis[] = [];
  let redisGuards: RedisReplayGuard[];
  beforeAll(async () => {
    db = await createDatabase();
    records = await jtiRecords(db.url, 2);
    const prefix = `ace_jti_${randomBytes(4).toString('hex')}:`;
    connections.push(connectRedis(REDIS_URL, 1000) as Redis, connectRedis(REDIS_URL, 1000) as Redis);
    redisGuards = connections.map((redis) => new RedisReplayGuard({ redis, keyPrefix: prefix }));
  });
  afterAll(async () => {
    for (const c of connections) closeRedis(c);
    await records?.close();
    await db?.drop();
  });
  describe('Postgres', () => {
    replayGuardConformance((): ReplayGuardUnderTest => ({ guard: records.one, peer: records.two }));
    it('prunes the rows no assertion can still need, and only those', async () => {
      const live = `prune-live-${randomBytes(4).toString('hex')}`;
      const gone = `prune-gone-${randomBytes(4).toString('hex')}`;
      await records.one.firstUse(live, Date.now() + 60_000);
      await records.one.firstUse(gone, Date.now() - 1000);
      expect(await records.one.pruneExpired()).toBeGreaterThanOrEqual(1);
      const [{ count }] = await records.sql`SELECT count(*)::int AS count FROM used_assertion_jtis WHERE expires_at <= clock_timestamp()`;
      expect(count).toBe(0);
      expect(await records.two.firstUse(live, Date.now() + 60_000)).toBe(false);
    });
  });
  describe('Redis', () => replayGuardConformance((): ReplayGuardUnderTest => ({ guard: redisGuards[0], peer: redisGuards[1] })));
  describe('Postgres and Redis (the service with REDIS_URL)', () =>
    replayGuardConformance((): ReplayGuardUnderTest => ({
      guard: new EitherRecordReplayGuard({ durable: records.one, fast: redisGuards[0] }),
      peer: new EitherRecordReplayGuard({ durable: records.two, fast: redisGuards[1] }),
      concurrentWinners: 'at most one',
    })));
});

describe('Used assertion jtis: PGlite (embedded default)', () => {
  let embedded: Awaited<ReturnType<typeof embeddedDatabase>>;
  let records: Awaited<ReturnType<typeof jtiRecords>>;
  beforeAll(async () => {
    embedded = await embeddedDatabase();
    records = await jtiRecords(embedded.url, 1);
  });
  afterAll(async () => {
    await records?.close();
    await embedded?.stop();
  });
  replayGuardConformance((): ReplayGuardUnderTest => ({ guard: records.one, peer: records.two }));
});
