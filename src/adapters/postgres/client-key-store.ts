// Postgres implementation of agents' public keys, trusted workload issuers and their bindings (migration
// 006_client_keys.sql). Reads are bounded by the store timeout; connection failures become
// StoreUnavailableError (503 + Retry-After).
import type { Sql, TransactionSql } from 'postgres';
import { BoundedPostgres } from './bounded.js';
import type { AgentKeys, ClientKeyStore, ClientKeyWrites, KeySource, PublicJwk, TrustedIssuer, WorkloadBinding } from '../../core/ports/client-keys.js';

type Row = Record<string, any>;

const sourceOf = (r: Row): KeySource => (r.jwks_uri ? { jwksUri: r.jwks_uri as string } : { keys: r.jwks as PublicJwk[] });
const toAgentKeys = (r: Row): AgentKeys => ({
  agentId: r.agent_id,
  apiKeyId: r.api_key_id,
  source: sourceOf(r),
  updatedAt: new Date(r.updated_at),
  view: { agentId: r.agent_id, apiKeyId: r.api_key_id, status: r.status, grants: Object.fromEntries((r.grants as Row[]).map((g) => [g.platform_id, { scopes: g.scopes, platformStatus: g.platform_status }])) },
});
const toIssuer = (r: Row): TrustedIssuer => ({ id: r.id, issuer: r.issuer, audience: r.audience, source: sourceOf(r), createdAt: new Date(r.created_at) });
const toBinding = (r: Row): WorkloadBinding => ({ issuerId: r.issuer_id, subject: r.subject, agentId: r.agent_id, apiKeyId: r.api_key_id, createdAt: new Date(r.created_at) });

export class PostgresClientKeyStore extends BoundedPostgres implements ClientKeyStore {
  allAgentKeys(): Promise<AgentKeys[]> {
    return this.run(async () => (await this.sql<Row[]>`${this.agentKeysSelect()}`).map(toAgentKeys));
  }

  agentKeysByApiKeyIds(apiKeyIds: string[]): Promise<AgentKeys[]> {
    return this.run(async () => (await this.sql<Row[]>`${this.agentKeysSelect()} WHERE a.api_key_id = ANY(${apiKeyIds})`).map(toAgentKeys));
  }

  /** Keys, status and grants (with each platform's status) of key agents: one snapshot, one row per agent. */
  private agentKeysSelect() {
    return this.sql`SELECT k.agent_id, a.api_key_id, a.status, k.jwks, k.jwks_uri, k.updated_at,
        (SELECT coalesce(json_agg(json_build_object('platform_id', g.platform_id, 'scopes', g.scopes, 'platform_status', p.status)), '[]')
           FROM grants g JOIN platforms p ON p.id = g.platform_id WHERE g.agent_id = a.id) AS grants
      FROM agent_client_keys k JOIN agents a ON a.id = k.agent_id`;
  }

  listTrustedIssuers(): Promise<TrustedIssuer[]> {
    return this.run(async () => (await this.sql<Row[]>`SELECT id, issuer, audience, jwks, jwks_uri, created_at FROM workload_issuers ORDER BY created_at, id`).map(toIssuer));
  }

  listBindings(issuerId?: string): Promise<WorkloadBinding[]> {
    return this.run(async () =>
      (
        await this.sql<Row[]>`SELECT b.issuer_id, b.subject, b.agent_id, a.api_key_id, b.created_at
          FROM workload_bindings b JOIN agents a ON a.id = b.agent_id
          ${issuerId === undefined ? this.sql`` : this.sql`WHERE b.issuer_id = ${issuerId}`}
          ORDER BY b.created_at, b.subject`
      ).map(toBinding),
    );
  }
}

/** The writes on `sql`: the transaction of the admin change (unit-of-work.ts). */
export function clientKeyWrites(sql: Sql | TransactionSql): ClientKeyWrites {
  const jwks = (source: KeySource) => (source.keys ? sql.json(source.keys as never) : null);
  return {
    async putAgentKeys(agentId, source) {
      await sql`INSERT INTO agent_client_keys (agent_id, jwks, jwks_uri, updated_at) VALUES (${agentId}, ${jwks(source)}, ${source.jwksUri ?? null}, now())
        ON CONFLICT (agent_id) DO UPDATE SET jwks = EXCLUDED.jwks, jwks_uri = EXCLUDED.jwks_uri, updated_at = now()`;
    },
    async agentKeysOf(agentId) {
      const rows = await sql<Row[]>`SELECT jwks, jwks_uri FROM agent_client_keys WHERE agent_id = ${agentId} FOR UPDATE`;
      return rows[0] ? sourceOf(rows[0]) : null;
    },
    async insertTrustedIssuer(row) {
      await sql`INSERT INTO workload_issuers (id, issuer, audience, jwks, jwks_uri, created_at)
        VALUES (${row.id}, ${row.issuer}, ${row.audience}, ${jwks(row.source)}, ${row.source.jwksUri ?? null}, ${row.createdAt})`;
    },
    async deleteTrustedIssuer(id) {
      return (await sql`DELETE FROM workload_issuers WHERE id = ${id} RETURNING id`).length > 0;
    },
    async getTrustedIssuer(id) {
      const rows = await sql<Row[]>`SELECT id, issuer, audience, jwks, jwks_uri, created_at FROM workload_issuers WHERE id = ${id}`;
      return rows[0] ? toIssuer(rows[0]) : null;
    },
    async trustedIssuerNamed(issuer) {
      const rows = await sql<Row[]>`SELECT id, issuer, audience, jwks, jwks_uri, created_at FROM workload_issuers WHERE issuer = ${issuer} FOR UPDATE`;
      return rows[0] ? toIssuer(rows[0]) : null;
    },
    async insertBinding(row) {
      const rows = await sql`INSERT INTO workload_bindings (issuer_id, subject, agent_id, created_at) VALUES (${row.issuerId}, ${row.subject}, ${row.agentId}, ${row.createdAt})
        ON CONFLICT DO NOTHING RETURNING subject`;
      return rows.length > 0;
    },
    async deleteBinding(issuerId, subject) {
      const rows = await sql<Row[]>`DELETE FROM workload_bindings WHERE issuer_id = ${issuerId} AND subject = ${subject} RETURNING agent_id`;
      return rows[0] ? (rows[0].agent_id as string) : null;
    },
  };
}
