// Postgres implementation of the revocation feed's storage (migration 003_revocation.sql). Every call is
// bounded by the store timeout; connection failures become StoreUnavailableError (503 + Retry-After).
import type { Sql, TransactionSql } from 'postgres';
import { BoundedPostgres } from './bounded.js';
import type { RevocationEntry, RevocationStore, RevocationTarget } from '../../core/ports/revocation-log.js';

type Row = Record<string, any>;

const toEntry = (r: Row): RevocationEntry => ({
  platformId: r.platform_id,
  seq: Number(r.seq),
  kind: r.kind,
  agentId: r.agent_id,
  kid: r.kid,
  iatMax: r.iat_max === null ? null : Number(r.iat_max),
  createdAt: new Date(r.created_at),
  expiresAt: new Date(r.expires_at),
});

export class PostgresRevocationStore extends BoundedPostgres implements RevocationStore {
  since(platformId: string, since: number, now: Date): Promise<{ head: number; entries: RevocationEntry[] }> {
    return this.run(async () => {
      // One statement, one snapshot: the head and the entries agree, so "since head" misses nothing.
      const rows = await this.sql<Row[]>`
        SELECT h.head, e.*
        FROM (SELECT coalesce((SELECT seq FROM revocation_heads WHERE platform_id = ${platformId}), 0) AS head) h
        LEFT JOIN revocation_entries e
          ON e.platform_id = ${platformId} AND e.seq > ${since} AND e.expires_at > ${now}
        ORDER BY e.seq`;
      const head = rows.length ? Number(rows[0].head) : 0;
      const entries = rows.filter((r) => r.seq !== null).map(toEntry);
      return { head, entries };
    });
  }

  heads(platformIds: string[]): Promise<Map<string, number>> {
    return this.run(async () => {
      const result = new Map<string, number>(platformIds.map((id) => [id, 0]));
      if (platformIds.length === 0) return result;
      const rows = await this.sql<Row[]>`SELECT platform_id, seq FROM revocation_heads WHERE platform_id = ANY(${platformIds}::uuid[])`;
      for (const row of rows) result.set(row.platform_id, Number(row.seq));
      return result;
    });
  }

  purgeExpired(now: Date): Promise<number> {
    return this.run(async () => {
      await this.sql`DELETE FROM revocation_entries WHERE expires_at <= ${now}`;
      const [{ count }] = await this.sql<Row[]>`SELECT count(*)::int AS count FROM revocation_entries`;
      return Number(count);
    });
  }

  agentsHoldingScopes(platformId: string, scopes: string[]): Promise<string[]> {
    return this.run(() => agentsHoldingScopes(this.sql, platformId, scopes));
  }

  platformExists(platformId: string): Promise<boolean> {
    return this.run(async () => (await this.sql<Row[]>`SELECT 1 FROM platforms WHERE id = ${platformId}`).length > 0);
  }
}

/** Appends the entries of `target` (one per affected platform) in the transaction of the admin change they belong to (unit-of-work.ts). */
export async function appendRevocation(sql: TransactionSql, target: RevocationTarget, expiresAt: Date): Promise<RevocationEntry[]> {
  // Bumping the head row takes its lock until commit: writers of one platform queue here, so each
  // platform's sequence is gap-free and in commit order. Platforms are locked in id order (no deadlock).
  const platformIds =
    target.kind === 'agent' ? [...new Set(target.platformIds)].sort() : target.kind === 'platform' ? [target.platformId] : null;
  if (platformIds && platformIds.length === 0) return [];
  const agentId = target.kind === 'agent' ? target.agentId : null;
  const kid = target.kind === 'key' ? target.kid : null;
  const iatMax = target.kind === 'key' ? null : target.iatMax;
  const rows = await sql<Row[]>`
    WITH targets AS (
      SELECT id FROM platforms
      WHERE ${platformIds === null ? sql`true` : sql`id = ANY(${platformIds}::uuid[])`}
      ORDER BY id
    ), heads AS (
      INSERT INTO revocation_heads (platform_id, seq)
      SELECT id, 1 FROM targets
      ON CONFLICT (platform_id) DO UPDATE SET seq = revocation_heads.seq + 1
      RETURNING platform_id, seq
    )
    INSERT INTO revocation_entries (platform_id, seq, kind, agent_id, kid, iat_max, expires_at)
    SELECT platform_id, seq, ${target.kind}, ${agentId}, ${kid}, ${iatMax}, ${expiresAt} FROM heads
    RETURNING *`;
  return rows.map(toEntry);
}

/** Agents whose grant on the platform holds any of `scopes`. */
export async function agentsHoldingScopes(sql: Sql | TransactionSql, platformId: string, scopes: string[]): Promise<string[]> {
  if (scopes.length === 0) return [];
  const rows = await sql<Row[]>`SELECT agent_id FROM grants WHERE platform_id = ${platformId} AND scopes && ${scopes}::text[]`;
  return rows.map((r) => r.agent_id as string);
}
