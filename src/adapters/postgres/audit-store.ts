// The audit trail in Postgres (table audit_events, migration 002). A batch is one INSERT … SELECT FROM
// jsonb_to_recordset(batch) statement whatever its size (one round trip, one commit); replays are idempotent
// through the (at, id) key. Partitions are daily; retention drops them whole.
import type { Sql, TransactionSql } from 'postgres';
import { StoreUnavailableError } from '../../core/errors.js';
import { toStoreError } from './errors.js';
import { boundedCall } from './bounded.js';
import type { AuditEvent, EventData, EventType } from '../../core/audit/events.js';
import type { AuditStore, EventQuery, MaintenanceResult } from '../../core/ports/audit-store.js';

/** Advisory lock of partition maintenance and retention: one replica at a time. */
export const MAINTENANCE_LOCK = 'ace:audit-maintenance';
const DAY_MS = 86_400_000;
const PARTITION = /^audit_events_p(\d{4})(\d{2})(\d{2})$/;

type Row = Record<string, any>;

const toEvent = (r: Row): AuditEvent => ({
  id: r.id,
  at: new Date(r.at).getTime(),
  type: r.type as EventType,
  agentId: r.agent_id,
  platformId: r.platform_id,
  kid: r.kid,
  jti: r.jti,
  actor: r.actor,
  clientAddress: r.client_address,
  data: (r.data as EventData | null) ?? null,
});

/** audit_events_pYYYYMMDD for the UTC day starting at `dayStartMs`. */
export function partitionName(dayStartMs: number): string {
  return `audit_events_p${new Date(dayStartMs).toISOString().slice(0, 10).replace(/-/g, '')}`;
}

export interface PostgresAuditStoreOptions {
  /** The audit trail's own pool (a hung audit write never holds a connection the token path needs). */
  sql: Sql;
  /** Bound on a read of the trail (STORE_TIMEOUT_MS): an unreachable Postgres answers 503, never hangs. */
  readTimeoutMs: number;
}

export class PostgresAuditStore implements AuditStore {
  private readonly sql: Sql;
  private readonly readTimeoutMs: number;

  constructor({ sql, readTimeoutMs }: PostgresAuditStoreOptions) {
    this.sql = sql;
    this.readTimeoutMs = readTimeoutMs;
  }

  /** Retryable failures (connection, failover, read-only server…) come out as StoreUnavailableError. */
  async insert(events: AuditEvent[]): Promise<number> {
    try {
      return await insertAuditEvents(this.sql, events);
    } catch (error) {
      throw toStoreError(error);
    }
  }

  /** A failover or restart: the reader gets a 503, not a 500. */
  list(q: EventQuery): Promise<AuditEvent[]> {
    return boundedCall({ timeoutMs: this.readTimeoutMs }, () => this.read(q));
  }

  private async read(q: EventQuery): Promise<AuditEvent[]> {
    const sql = this.sql;
    const conditions = [sql`TRUE`];
    if (q.types.length > 0) conditions.push(sql`type = ANY(${q.types}::text[])`);
    if (q.agentId) conditions.push(sql`agent_id = ${q.agentId}::uuid`);
    if (q.platformId) conditions.push(sql`platform_id = ${q.platformId}::uuid`);
    if (q.since !== undefined) conditions.push(sql`at >= ${new Date(q.since).toISOString()}::timestamptz`);
    if (q.until !== undefined) conditions.push(sql`at < ${new Date(q.until).toISOString()}::timestamptz`);
    if (q.after) conditions.push(sql`(at, id) > (${new Date(q.after.at).toISOString()}::timestamptz, ${q.after.id}::uuid)`);
    const where = conditions.reduce((acc, c) => sql`${acc} AND ${c}`);
    const rows = await sql`SELECT * FROM audit_events WHERE ${where} ORDER BY at, id LIMIT ${q.limit}`;
    return rows.map(toEvent);
  }

  maintain(now: Date, retentionDays: number, daysAhead: number): Promise<MaintenanceResult | undefined> {
    return this.sql.begin(async (tx) => {
      // Transaction-scoped: released at commit or rollback, even if this replica dies half-way.
      const [{ locked }] = await tx`SELECT pg_try_advisory_xact_lock(hashtext(${MAINTENANCE_LOCK})) AS locked`;
      if (!locked) return undefined;
      const today = Math.floor(now.getTime() / DAY_MS) * DAY_MS;
      const cutoff = now.getTime() - retentionDays * DAY_MS;
      const existing = new Set(
        (
          await tx`
            SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = 'audit_events'::regclass`
        ).map((r) => r.relname as string),
      );
      const result: MaintenanceResult = { created: [], dropped: [], deleted: 0 };
      // Yesterday too: a replica whose clock lags a little, or a spool replayed just after midnight.
      for (let day = today - DAY_MS; day <= today + daysAhead * DAY_MS; day += DAY_MS) {
        const name = partitionName(day);
        if (existing.has(name) || day + DAY_MS <= cutoff) continue;
        const from = new Date(day).toISOString();
        const to = new Date(day + DAY_MS).toISOString();
        // Identifiers and bounds come from dates computed here, never from input.
        const [{ stray }] = await tx`
          SELECT count(*)::int AS stray FROM audit_events_default WHERE at >= ${from}::timestamptz AND at < ${to}::timestamptz`;
        if (stray === 0) {
          await tx.unsafe(`CREATE TABLE ${name} PARTITION OF audit_events FOR VALUES FROM ('${from}') TO ('${to}')`);
        } else {
          // Rows of that day already sit in the default partition (written before the partition existed):
          // move them into the new table, then attach it (Postgres refuses to create it over them).
          await tx.unsafe(`CREATE TABLE ${name} (LIKE audit_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`);
          await tx.unsafe(
            `WITH moved AS (DELETE FROM audit_events_default WHERE at >= '${from}' AND at < '${to}' RETURNING *) INSERT INTO ${name} SELECT * FROM moved`,
          );
          await tx.unsafe(`ALTER TABLE audit_events ATTACH PARTITION ${name} FOR VALUES FROM ('${from}') TO ('${to}')`);
        }
        result.created.push(name);
      }
      for (const name of existing) {
        const m = PARTITION.exec(name);
        if (!m) continue;
        const dayEnd = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) + DAY_MS;
        if (dayEnd > cutoff) continue;
        await tx.unsafe(`DROP TABLE ${name}`);
        result.dropped.push(name);
      }
      const deleted = await tx`DELETE FROM audit_events_default WHERE at < ${new Date(cutoff).toISOString()}::timestamptz`;
      result.deleted = deleted.count;
      return result;
    }) as Promise<MaintenanceResult | undefined>;
  }

  /**
   * Succeeds only when the server would take an insert: "answers SELECT 1" is not enough, since during a
   * failover the pool may sit on a server in recovery or fenced read-only.
   */
  async ping(): Promise<void> {
    let row: Row | undefined;
    try {
      [row] = await this.sql`SELECT pg_is_in_recovery() AS recovery, current_setting('transaction_read_only') AS read_only`;
    } catch (error) {
      throw toStoreError(error);
    }
    if (row?.recovery !== false || row.read_only !== 'off') {
      throw new StoreUnavailableError('postgres', new Error('the server does not accept writes (in recovery or read-only)'));
    }
  }

  async close(): Promise<void> {
    await this.sql.end({ timeout: 2 });
  }
}

/**
 * Inserts `events` in one statement on `sql`: the trail's pool, or the transaction of the admin change
 * they record (unit-of-work.ts). Events already present (same at and id) are skipped; returns rows inserted.
 */
export async function insertAuditEvents(sql: Sql | TransactionSql, events: AuditEvent[]): Promise<number> {
  if (events.length === 0) return 0;
  // The whole batch as one JSON parameter: serialising it is one native JSON.stringify, which costs the
  // HTTP process less per statement than postgres.js encoding ten array parameters (measured), and
  // `unnest` over ten array parameters built by hand cost Postgres more per row (`--only audit-insert`).
  const rows = JSON.stringify(
    events.map((e) => ({
      id: e.id,
      at: new Date(e.at).toISOString(),
      type: e.type,
      agent_id: e.agentId,
      platform_id: e.platformId,
      kid: e.kid,
      jti: e.jti,
      actor: e.actor,
      client_address: e.clientAddress,
      data: e.data,
    })),
  );
  const result = await sql`
    INSERT INTO audit_events (id, at, type, agent_id, platform_id, kid, jti, actor, client_address, data)
    SELECT * FROM jsonb_to_recordset(${rows}::text::jsonb) AS r(
      id uuid, at timestamptz, type text, agent_id uuid, platform_id uuid, kid text, jti uuid,
      actor text, client_address text, data jsonb)
    ON CONFLICT DO NOTHING`;
  return result.count;
}
