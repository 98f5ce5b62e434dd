// Grants (table grants): the statements on `sql`, the pool for reads or a unit of work's transaction.
import type { Sql, TransactionSql } from 'postgres';
import type { GrantRecord } from '../../core/model.js';
import { iso, type Row } from './rows.js';

const toGrant = (r: Row): GrantRecord => ({
  agentId: r.agent_id,
  platformId: r.platform_id,
  scopes: r.scopes,
  updatedAt: iso(r.updated_at),
});

export function grantStatements(sql: Sql | TransactionSql) {
  return {
    async listGrants(agentId: string): Promise<GrantRecord[]> {
      return (await sql`SELECT * FROM grants WHERE agent_id = ${agentId} ORDER BY created_at, platform_id`).map(toGrant);
    },
    async apiKeyIdsOnPlatform(platformId: string): Promise<string[]> {
      return (await sql`SELECT a.api_key_id FROM grants g JOIN agents a ON a.id = g.agent_id WHERE g.platform_id = ${platformId}`).map(
        (r) => r.api_key_id as string,
      );
    },
    async putGrant(agentId: string, platformId: string, scopes: string[]): Promise<GrantRecord> {
      const [row] = await sql`
        INSERT INTO grants (agent_id, platform_id, scopes)
        VALUES (${agentId}, ${platformId}, ${scopes}::text[])
        ON CONFLICT (agent_id, platform_id) DO UPDATE SET scopes = EXCLUDED.scopes, updated_at = now()
        RETURNING *`;
      return toGrant(row);
    },
    async deleteGrant(agentId: string, platformId: string): Promise<boolean> {
      const result = await sql`DELETE FROM grants WHERE agent_id = ${agentId} AND platform_id = ${platformId}`;
      return result.count > 0;
    },
  };
}
