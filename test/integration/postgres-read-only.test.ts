// A Postgres that answers but refuses writes (what a pool meets on a standby or on a primary fenced
// read-only during a failover), made real with `default_transaction_read_only` on a test database:
// - the store answers 503 (StoreUnavailableError), not 500, for SQLSTATE 25006;
// - the audit trail spools, and its drain does not take "SELECT 1 answers" for "Postgres is back": the
//   spool segment stays until its events are committed (89 events were once lost this way);
// - a spooled event Postgres refuses for itself is kept in the spool's rejected file, never dropped.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectPostgres } from '../../src/adapters/postgres/connect.js';
import { PostgresStore } from '../../src/adapters/postgres/postgres-store.js';
import { PostgresUnitOfWork } from '../../src/adapters/postgres/unit-of-work.js';
import { PostgresAuditStore } from '../../src/adapters/postgres/audit-store.js';
import { classifyPostgresError, isRetryable } from '../../src/adapters/postgres/errors.js';
import { migrate } from '../../src/adapters/postgres/migrate.js';
import { AuditTrail, type TrailObserver } from '../../src/adapters/audit-trail/trail.js';
import { Spool } from '../../src/adapters/audit-trail/spool.js';
import { auditEvents } from '../../src/core/audit/events.js';
import { StoreUnavailableError } from '../../src/core/errors.js';
import { createDatabase, PG_ADMIN_URL, type TestDatabase } from '../support/service.js';
import { waitFor } from '../../kit/wait.js';

const TIMEOUT_MS = 2000;
const issued = () =>
  auditEvents.tokenIssued({ jti: crypto.randomUUID(), agentId: crypto.randomUUID(), platformId: crypto.randomUUID(), scope: 's', kid: 'k', clientAddress: '10.0.0.1', by: { method: 'client_secret' } });

describe('a Postgres that answers but refuses writes', () => {
  let database: TestDatabase;
  let admin: postgres.Sql;
  let dataDir: string;
  const readOnly = async (on: boolean) => {
    await admin.unsafe(`ALTER DATABASE ${database.name} ${on ? 'SET default_transaction_read_only = on' : 'RESET default_transaction_read_only'}`);
    // Sessions read the setting when they start: end the pools' current ones (they reconnect).
    await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${database.name} AND pid <> pg_backend_pid()`;
  };

  beforeAll(async () => {
    database = await createDatabase();
    admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
    const sql = connectPostgres({ url: database.url, poolSize: 1, timeoutMs: TIMEOUT_MS });
    await migrate(sql);
    await sql.end();
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'ace-read-only-'));
  });

  afterAll(async () => {
    await admin?.end();
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('classifies every "try again" failure as retryable, and nothing else', () => {
    for (const code of ['25006', '40001', '40P01', '26000', '57P01', '57P03', '08006', '08P01', '53300', 'ECONNREFUSED', 'CONNECTION_CLOSED', 'CONNECT_TIMEOUT']) {
      expect(isRetryable({ code }), code).toBe(true);
    }
    for (const code of ['23505', '22P02', '42P01', '42601']) expect(isRetryable({ code }), code).toBe(false);
    expect(isRetryable(new Error('no code'))).toBe(false);
    expect(classifyPostgresError({ code: '57014' })).toBe('deadline');
  });

  it('admin writes answer StoreUnavailableError (503) on SQLSTATE 25006, and succeed once writable again', async () => {
    const sql = connectPostgres({ url: database.url, poolSize: 2, timeoutMs: TIMEOUT_MS });
    const store = new PostgresStore({ sql, timeoutMs: TIMEOUT_MS });
    const uow = new PostgresUnitOfWork({ store, recordAudit: false, onEffectFailure: () => {} });
    const createAgent = () => uow.run((tx) => tx.store.createAgent({ name: 'a', apiKeyId: `k${Date.now()}`, secretHash: 'h' }));
    try {
      await readOnly(true);
      const error = await createAgent().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).cause).toMatchObject({ code: '25006' });
      expect(await store.listAgents()).toEqual([]); // reads still work
      await readOnly(false);
      // The first use of a connection the server just ended may fail (503 too); the pool then reconnects.
      await waitFor('an admin write to succeed', () => createAgent().then(() => true, () => false), 10_000);
    } finally {
      await store.close();
    }
  });

  it('the spool keeps its segment while Postgres refuses writes, and drains every event once it takes them', async () => {
    const sql = connectPostgres({ url: database.url, poolSize: 1, timeoutMs: TIMEOUT_MS });
    const store = new PostgresAuditStore({ sql, readTimeoutMs: TIMEOUT_MS });
    const failed: number[] = [];
    const observer: TrailObserver = { written() {}, batch() {}, failed: (n) => failed.push(n), spoolDepth() {}, spooling() {}, refusing() {}, postgresDown() {}, drained() {}, leftInSpool() {} };
    const spool = new Spool({ dataDir, maxBytes: 1e9 });
    const trail = new AuditTrail({ store, spool, flushMs: 2, batchMax: 1000, maxInFlight: 1, writeTimeoutMs: TIMEOUT_MS, drainIntervalMs: 60_000, observer });
    const inDatabase = async () => {
      const db = postgres(database.url, { max: 1, onnotice: () => {} });
      try {
        return (await db`SELECT count(*)::int AS n FROM audit_events`)[0].n as number;
      } finally {
        await db.end();
      }
    };
    try {
      await readOnly(true);
      const events = Array.from({ length: 40 }, issued);
      await Promise.all(events.map((e) => trail.record(e)));
      expect(trail.spooling).toBe(true);
      expect(spool.depth).toBe(40);

      // SELECT 1 works on this server; the drain must still leave the segment alone.
      await sql`SELECT 1`;
      await trail.drain();
      await trail.drain();
      expect(trail.spooling).toBe(true);
      expect(readdirSync(spool.dir).filter((f) => f.startsWith('spool-'))).toHaveLength(1);
      expect(failed).toEqual([]);
      expect(await inDatabase()).toBe(0);

      await readOnly(false);
      await waitFor('the spool to drain', async () => {
        await trail.drain();
        return !trail.spooling;
      }, 10_000);
      expect(await inDatabase()).toBe(40);
      expect(readdirSync(spool.dir).filter((f) => f.startsWith('spool-'))).toEqual([]);
      expect(spool.depth).toBe(0);

      // A segment with a line Postgres refuses for itself (not a uuid): the others land, that one is kept.
      const good = [issued(), issued()];
      const bad = { ...issued(), agentId: 'not-a-uuid' };
      writeFileSync(path.join(spool.dir, `spool-${2 ** 22 + 1}-deadbeef-1.ready`), [good[0], bad, good[1]].map((e) => JSON.stringify(e)).join('\n') + '\n');
      await trail.drain();
      expect(await inDatabase()).toBe(42);
      expect(readdirSync(spool.dir).filter((f) => f.startsWith('spool-'))).toEqual([]);
      expect(readFileSync(spool.rejectedPath, 'utf8').trim().split('\n').map((l) => JSON.parse(l).id)).toEqual([bad.id]);
      expect(failed).toEqual([1]);
    } finally {
      await trail.close();
      await store.close();
    }
  });
});
