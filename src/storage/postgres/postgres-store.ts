// The Postgres implementation of Store. Every call is bounded by STORE_TIMEOUT_MS and connection
// failures become StoreUnavailableError (a 503 with Retry-After), never a hang or a stack trace.
import postgres, { type Sql, type TransactionSql } from 'postgres';
import { StoreUnavailableError } from '../../errors/catalog.js';
import { withTimeout } from '../timeout.js';
import type {
  AgentRecord,
  AgentStatus,
  AgentView,
  GrantRecord,
  PlatformInput,
  PlatformRecord,
  SecretHashes,
  SigningKeyRow,
  SigningKeyWriter,
  Store,
} from '../types.js';

export interface PostgresOptions {
  url: string;
  poolSize: number;
  timeoutMs: number;
  onHealth?: (up: boolean) => void;
}

export function connectPostgres(options: PostgresOptions): Sql {
  return postgres(options.url, {
    max: options.poolSize,
    connect_timeout: Math.max(1, Math.ceil(options.timeoutMs / 1000)),
    idle_timeout: 60,
    max_lifetime: 30 * 60,
    onnotice: () => {},
    // Timestamps come back as ISO strings through toISOString() in the mappers below.
    transform: { undefined: null },
    connection: { application_name: 'agent-credential-exchange' },
  });
}

const isConnectionError = (error: unknown): boolean => {
  const code = (error as { code?: string } | null)?.code;
  if (typeof code !== 'string') return false;
  return /^(08|57|53)/.test(code) || /^(ECONN|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|CONNECT|CONNECTION)/.test(code);
};

const iso = (value: Date | string): string => (value instanceof Date ? value.toISOString() : new Date(value).toISOString());

type Row = Record<string, any>;

const toPlatform = (r: Row): PlatformRecord => ({
  id: r.id,
  name: r.name,
  domain: r.domain,
  status: r.status,
  verificationStatus: r.verification_status,
  scopes: r.scopes,
  routes: r.routes,
  createdAt: iso(r.created_at),
  updatedAt: iso(r.updated_at),
});

const toAgent = (r: Row): AgentRecord => ({
  id: r.id,
  name: r.name,
  status: r.status,
  apiKeyId: r.api_key_id,
  createdAt: iso(r.created_at),
  updatedAt: iso(r.updated_at),
});

const toGrant = (r: Row): GrantRecord => ({
  agentId: r.agent_id,
  platformId: r.platform_id,
  scopes: r.scopes,
  updatedAt: iso(r.updated_at),
});

const toKey = (r: Row): SigningKeyRow => ({
  kid: r.kid,
  publicJwk: r.public_jwk,
  privateKeyEncrypted: r.private_key_encrypted,
  createdAt: new Date(r.created_at),
  activatesAt: new Date(r.activates_at),
  retiredAt: r.retired_at ? new Date(r.retired_at) : null,
});

export class PostgresStore implements Store {
  constructor(
    private readonly sql: Sql,
    private readonly options: Pick<PostgresOptions, 'timeoutMs' | 'onHealth'>,
  ) {}

  /** Runs one store call under the deadline and maps connection failures. */
  private async run<T>(fn: () => Promise<T>): Promise<T> {
    try {
      const result = await withTimeout('postgres', fn(), this.options.timeoutMs);
      this.options.onHealth?.(true);
      return result;
    } catch (error) {
      if (error instanceof StoreUnavailableError || isConnectionError(error)) {
        this.options.onHealth?.(false);
        throw error instanceof StoreUnavailableError ? error : new StoreUnavailableError('postgres', error);
      }
      throw error;
    }
  }

  getAgentView(apiKeyId: string): Promise<AgentView | null> {
    return this.run(async () => {
      const rows = await this.sql`
        SELECT a.id, a.api_key_id, a.status, g.platform_id, g.scopes, p.status AS platform_status
        FROM agents a
        LEFT JOIN grants g ON g.agent_id = a.id
        LEFT JOIN platforms p ON p.id = g.platform_id
        WHERE a.api_key_id = ${apiKeyId}`;
      if (rows.length === 0) return null;
      const view: AgentView = { agentId: rows[0].id, apiKeyId: rows[0].api_key_id, status: rows[0].status, grants: {} };
      for (const r of rows) {
        if (r.platform_id) view.grants[r.platform_id] = { scopes: r.scopes, platformStatus: r.platform_status };
      }
      return view;
    });
  }

  getPlatform(platformId: string): Promise<PlatformRecord | null> {
    return this.run(async () => {
      const [row] = await this.sql`SELECT * FROM platforms WHERE id = ${platformId}`;
      return row ? toPlatform(row) : null;
    });
  }

  getSecretHashes(apiKeyId: string): Promise<SecretHashes | null> {
    return this.run(async () => {
      const [row] = await this.sql`
        SELECT id, secret_hash, previous_secret_hash, previous_secret_expires_at
        FROM agents WHERE api_key_id = ${apiKeyId}`;
      if (!row) return null;
      const expires = row.previous_secret_expires_at ? new Date(row.previous_secret_expires_at) : null;
      const graceOpen = row.previous_secret_hash && expires && expires.getTime() > Date.now();
      return {
        agentId: row.id,
        current: row.secret_hash,
        previous: graceOpen ? row.previous_secret_hash : null,
        previousExpiresAt: graceOpen ? expires : null,
      };
    });
  }

  createPlatform(input: PlatformInput): Promise<PlatformRecord> {
    return this.run(async () => {
      const [row] = await this.sql`
        INSERT INTO platforms (id, name, domain, status, verification_status, scopes, routes)
        VALUES (${crypto.randomUUID()}, ${input.name}, ${input.domain}, ${input.status}, ${input.verificationStatus},
                ${this.sql.json(input.scopes as never)}, ${this.sql.json(input.routes as never)})
        RETURNING *`;
      return toPlatform(row);
    });
  }

  updatePlatform(platformId: string, patch: Partial<PlatformInput>): Promise<PlatformRecord | null> {
    return this.run(() =>
      this.sql.begin(async (tx) => {
        const [current] = await tx`SELECT * FROM platforms WHERE id = ${platformId} FOR UPDATE`;
        if (!current) return null;
        const next = { ...toPlatform(current), ...patch };
        const [row] = await tx`
          UPDATE platforms SET
            name = ${next.name}, domain = ${next.domain}, status = ${next.status},
            verification_status = ${next.verificationStatus},
            scopes = ${tx.json(next.scopes as never)}, routes = ${tx.json(next.routes as never)},
            updated_at = now()
          WHERE id = ${platformId}
          RETURNING *`;
        if (patch.scopes) {
          // Dropped scopes leave every grant on this platform.
          const kept = patch.scopes.map((s) => s.name);
          await tx`
            UPDATE grants SET
              scopes = ARRAY(SELECT unnest(scopes) INTERSECT SELECT unnest(${kept}::text[]) ORDER BY 1),
              updated_at = now()
            WHERE platform_id = ${platformId} AND NOT (scopes <@ ${kept}::text[])`;
        }
        return toPlatform(row);
      }),
    );
  }

  listPlatforms(): Promise<PlatformRecord[]> {
    return this.run(async () => (await this.sql`SELECT * FROM platforms ORDER BY created_at, id`).map(toPlatform));
  }

  /** api_key_ids of every agent holding a grant on the platform (for cache invalidation). */
  apiKeyIdsOnPlatform(platformId: string): Promise<string[]> {
    return this.run(async () =>
      (await this.sql`SELECT a.api_key_id FROM grants g JOIN agents a ON a.id = g.agent_id WHERE g.platform_id = ${platformId}`).map(
        (r) => r.api_key_id as string,
      ),
    );
  }

  createAgent(input: { name: string; apiKeyId: string; secretHash: string }): Promise<AgentRecord> {
    return this.run(async () => {
      const [row] = await this.sql`
        INSERT INTO agents (id, name, status, api_key_id, secret_hash)
        VALUES (${crypto.randomUUID()}, ${input.name}, 'active', ${input.apiKeyId}, ${input.secretHash})
        RETURNING *`;
      return toAgent(row);
    });
  }

  getAgent(agentId: string): Promise<AgentRecord | null> {
    return this.run(async () => {
      const [row] = await this.sql`SELECT * FROM agents WHERE id = ${agentId}`;
      return row ? toAgent(row) : null;
    });
  }

  listAgents(): Promise<AgentRecord[]> {
    return this.run(async () => (await this.sql`SELECT * FROM agents ORDER BY created_at, id`).map(toAgent));
  }

  updateAgent(agentId: string, patch: { name?: string; status?: AgentStatus }): Promise<AgentRecord | null> {
    return this.run(async () => {
      const [row] = await this.sql`
        UPDATE agents SET
          name = COALESCE(${patch.name ?? null}, name),
          status = COALESCE(${patch.status ?? null}, status),
          updated_at = now()
        WHERE id = ${agentId}
        RETURNING *`;
      return row ? toAgent(row) : null;
    });
  }

  rotateSecret(agentId: string, secretHash: string, previousValidUntil: Date | null): Promise<AgentRecord | null> {
    return this.run(async () => {
      const [row] = await this.sql`
        UPDATE agents SET
          previous_secret_hash = CASE WHEN ${previousValidUntil}::timestamptz IS NULL THEN NULL ELSE secret_hash END,
          previous_secret_expires_at = ${previousValidUntil}::timestamptz,
          secret_hash = ${secretHash},
          updated_at = now()
        WHERE id = ${agentId}
        RETURNING *`;
      return row ? toAgent(row) : null;
    });
  }

  putGrant(agentId: string, platformId: string, scopes: string[]): Promise<GrantRecord> {
    return this.run(async () => {
      const [row] = await this.sql`
        INSERT INTO grants (agent_id, platform_id, scopes)
        VALUES (${agentId}, ${platformId}, ${scopes}::text[])
        ON CONFLICT (agent_id, platform_id) DO UPDATE SET scopes = EXCLUDED.scopes, updated_at = now()
        RETURNING *`;
      return toGrant(row);
    });
  }

  deleteGrant(agentId: string, platformId: string): Promise<boolean> {
    return this.run(async () => {
      const result = await this.sql`DELETE FROM grants WHERE agent_id = ${agentId} AND platform_id = ${platformId}`;
      return result.count > 0;
    });
  }

  listGrants(agentId: string): Promise<GrantRecord[]> {
    return this.run(async () => (await this.sql`SELECT * FROM grants WHERE agent_id = ${agentId} ORDER BY created_at, platform_id`).map(toGrant));
  }

  listSigningKeys(): Promise<SigningKeyRow[]> {
    return this.run(async () => (await this.sql`SELECT * FROM signing_keys ORDER BY activates_at, kid`).map(toKey));
  }

  withLock<T>(lock: string, wait: boolean, fn: (keys: SigningKeyWriter) => Promise<T>): Promise<T | undefined> {
    // Transaction-scoped advisory lock: released by commit or rollback, even if this process dies.
    // No store deadline here: key generation inside may take a moment and the lock must not be abandoned.
    return this.sql.begin(async (tx) => {
      if (wait) await tx`SELECT pg_advisory_xact_lock(hashtext(${lock}))`;
      else {
        const [{ locked }] = await tx`SELECT pg_try_advisory_xact_lock(hashtext(${lock})) AS locked`;
        if (!locked) return undefined;
      }
      return fn(keyWriter(tx));
    }) as Promise<T | undefined>;
  }

  ping(): Promise<void> {
    return this.run(async () => {
      await this.sql`SELECT 1`;
    });
  }

  async close(): Promise<void> {
    await this.sql.end({ timeout: 2 });
  }
}

function keyWriter(tx: TransactionSql): SigningKeyWriter {
  return {
    async listSigningKeys() {
      return (await tx`SELECT * FROM signing_keys ORDER BY activates_at, kid`).map(toKey);
    },
    async insertSigningKey(row) {
      await tx`
        INSERT INTO signing_keys (kid, public_jwk, private_key_encrypted, created_at, activates_at, retired_at)
        VALUES (${row.kid}, ${tx.json(row.publicJwk as never)}, ${row.privateKeyEncrypted}, ${row.createdAt},
                ${row.activatesAt}, ${row.retiredAt})`;
    },
    async updateSigningKey(kid, changes) {
      await tx`
        UPDATE signing_keys SET
          activates_at = COALESCE(${changes.activatesAt ?? null}::timestamptz, activates_at),
          retired_at = COALESCE(${changes.retiredAt ?? null}::timestamptz, retired_at)
        WHERE kid = ${kid}`;
    },
  };
}
