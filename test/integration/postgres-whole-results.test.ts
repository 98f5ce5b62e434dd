// postgres.js resolves the query after one that failed part-way through its rows with empty slots before its
// own rows (porsager/postgres#1119, #1181): on a real Postgres, the driver alone shows it, and the pool the
// service builds (connectPostgres) turns such a result into a store failure (503), so that a read never says
// "not found" about an agent that exists. The next query on the connection is whole again.
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectPostgres } from '../../src/adapters/postgres/connect.js';
import { migrate } from '../../src/adapters/postgres/migrate.js';
import { PostgresStore } from '../../src/adapters/postgres/postgres-store.js';
import { PostgresUnitOfWork } from '../../src/adapters/postgres/unit-of-work.js';
import { IncompleteResultError } from '../../src/adapters/postgres/whole-results.js';
import { StoreUnavailableError } from '../../src/core/errors.js';
import { createDatabase, type TestDatabase } from '../support/service.js';

const TIMEOUT_MS = 5000;

/** A statement that sends 4,999 rows, then fails (division by zero) on the 5,000th. */
const failingMidStream = (sql: postgres.Sql) => sql`SELECT g, 1 / (5000 - g) AS q FROM generate_series(1, 10000) g`.catch((error: { code?: string }) => error.code);

describe('a query after one that failed mid-stream on the same connection', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await createDatabase();
    const sql = connectPostgres({ url: database.url, poolSize: 1, timeoutMs: TIMEOUT_MS });
    await migrate(sql);
    await sql.end();
  });

  afterAll(async () => {
    await database?.drop();
  });

  it('the driver alone resolves it with empty slots before its row (the defect this guards against)', async () => {
    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      const failed = failingMidStream(sql);
      const next = sql`SELECT 42 AS answer`;
      expect(await failed).toBe('22012');
      const result = await next;
      expect(result.count).toBe(1);
      expect(result.length).toBeGreaterThan(1);
      expect(0 in result).toBe(false);
    } finally {
      await sql.end();
    }
  });

  it("through the service's pool it is a store failure (503), and the next query is whole", async () => {
    const sql = connectPostgres({ url: database.url, poolSize: 1, timeoutMs: TIMEOUT_MS });
    try {
      const failed = failingMidStream(sql);
      const next = sql`SELECT 42 AS answer`.then(
        () => 'resolved',
        (error: unknown) => error,
      );
      expect(await failed).toBe('22012');
      const error = await next;
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).cause).toBeInstanceOf(IncompleteResultError);
      expect([...(await sql`SELECT 42 AS answer`)]).toEqual([{ answer: 42 }]);
      // `unsafe` goes through the same check.
      const failedAgain = failingMidStream(sql);
      const unsafe = sql.unsafe('SELECT 42 AS answer').then(
        () => 'resolved',
        (e: unknown) => e,
      );
      await failedAgain;
      expect(await unsafe).toBeInstanceOf(StoreUnavailableError);
    } finally {
      await sql.end();
    }
  });

  it('a read of an agent that exists is never "not found": the store answers it or fails with 503', async () => {
    const sql = connectPostgres({ url: database.url, poolSize: 1, timeoutMs: TIMEOUT_MS });
    const store = new PostgresStore({ sql, timeoutMs: TIMEOUT_MS });
    const uow = new PostgresUnitOfWork({ store, recordAudit: false, onEffectFailure: () => {} });
    try {
      const agent = await uow.run((tx) => tx.store.createAgent({ name: 'kept', apiKeyId: `k${Date.now()}`, secretHash: 'h' }));
      const failed = failingMidStream(sql);
      const read = store.getAgent(agent.id).then(
        (found) => found,
        (error: unknown) => error,
      );
      await failed;
      expect(await read).toBeInstanceOf(StoreUnavailableError);
      expect(await store.getAgent(agent.id)).toMatchObject({ id: agent.id, name: 'kept' });
    } finally {
      await sql.end();
    }
  });
});
