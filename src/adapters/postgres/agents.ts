// Agents (table agents) and what the token path reads of them: the secret hashes and the view (the agent
// with its grants and their platforms' status). The statements on `sql`, the pool for reads or a unit of
// work's transaction.
import type { Sql, TransactionSql } from 'postgres';
import type { AgentCredentials, AgentRecord, AgentStatus, AgentView, SecretHashes } from '../../core/model.js';
import { iso, type Row } from './rows.js';

const toAgent = (r: Row): AgentRecord => ({
  id: r.id,
  name: r.name,
  status: r.status,
  apiKeyId: r.api_key_id,
  createdAt: iso(r.created_at),
  updatedAt: iso(r.updated_at),
});

/** One agent's rows of agents ⟕ grants ⟕ platforms (one per grant, or one with no grant). */
const toAgentView = (rows: readonly Row[]): AgentView => {
  const view: AgentView = { agentId: rows[0].id, apiKeyId: rows[0].api_key_id, status: rows[0].status, grants: {} };
  for (const r of rows) {
    if (r.platform_id) view.grants[r.platform_id] = { scopes: r.scopes, platformStatus: r.platform_status };
  }
  return view;
};

/** The previous hash only while its grace period lasts. */
const toSecretHashes = (r: Row): SecretHashes => {
  const expires = r.previous_secret_expires_at ? new Date(r.previous_secret_expires_at) : null;
  const graceOpen = r.previous_secret_hash && expires && expires.getTime() > Date.now();
  return {
    agentId: r.id,
    current: r.secret_hash,
    previous: graceOpen ? r.previous_secret_hash : null,
    previousExpiresAt: graceOpen ? expires : null,
  };
};

export function agentStatements(sql: Sql | TransactionSql) {
  return {
    // Without a cache there is no invalidation to go by: the view is always read again after a check.
    async getAgentView(apiKeyId: string): Promise<AgentView | null> {
      const rows = await sql`
        SELECT a.id, a.api_key_id, a.status, g.platform_id, g.scopes, p.status AS platform_status
        FROM agents a
        LEFT JOIN grants g ON g.agent_id = a.id
        LEFT JOIN platforms p ON p.id = g.platform_id
        WHERE a.api_key_id = ${apiKeyId}`;
      return rows.length === 0 ? null : toAgentView(rows);
    },
    async getSecretHashes(apiKeyId: string): Promise<SecretHashes | null> {
      const [row] = await sql`
        SELECT id, secret_hash, previous_secret_hash, previous_secret_expires_at
        FROM agents WHERE api_key_id = ${apiKeyId}`;
      return row ? toSecretHashes(row) : null;
    },
    async getAgentCredentials(apiKeyId: string): Promise<AgentCredentials | null> {
      // One statement, so the hashes and the view are one snapshot (one row per grant; the hashes repeat).
      const rows = await sql`
        SELECT a.id, a.api_key_id, a.status, a.secret_hash, a.previous_secret_hash, a.previous_secret_expires_at,
               g.platform_id, g.scopes, p.status AS platform_status
        FROM agents a
        LEFT JOIN grants g ON g.agent_id = a.id
        LEFT JOIN platforms p ON p.id = g.platform_id
        WHERE a.api_key_id = ${apiKeyId}`;
      return rows.length === 0 ? null : { hashes: toSecretHashes(rows[0]), view: toAgentView(rows) };
    },
    async getAgent(agentId: string): Promise<AgentRecord | null> {
      const [row] = await sql`SELECT * FROM agents WHERE id = ${agentId}`;
      return row ? toAgent(row) : null;
    },
    async listAgents(): Promise<AgentRecord[]> {
      return (await sql`SELECT * FROM agents ORDER BY created_at, id`).map(toAgent);
    },
    async createAgent(input: { name: string; apiKeyId: string; secretHash: string }): Promise<AgentRecord> {
      const [row] = await sql`
        INSERT INTO agents (id, name, status, api_key_id, secret_hash)
        VALUES (${crypto.randomUUID()}, ${input.name}, 'active', ${input.apiKeyId}, ${input.secretHash})
        RETURNING *`;
      return toAgent(row);
    },
    async updateAgent(agentId: string, patch: { name?: string; status?: AgentStatus }): Promise<AgentRecord | null> {
      const [row] = await sql`
        UPDATE agents SET
          name = COALESCE(${patch.name ?? null}, name),
          status = COALESCE(${patch.status ?? null}, status),
          updated_at = now()
        WHERE id = ${agentId}
        RETURNING *`;
      return row ? toAgent(row) : null;
    },
    async rotateSecret(agentId: string, secretHash: string, previousValidUntil: Date | null): Promise<AgentRecord | null> {
      const [row] = await sql`
        UPDATE agents SET
          previous_secret_hash = CASE WHEN ${previousValidUntil}::timestamptz IS NULL THEN NULL ELSE secret_hash END,
          previous_secret_expires_at = ${previousValidUntil}::timestamptz,
          secret_hash = ${secretHash},
          updated_at = now()
        WHERE id = ${agentId}
        RETURNING *`;
      return row ? toAgent(row) : null;
    },
  };
}
