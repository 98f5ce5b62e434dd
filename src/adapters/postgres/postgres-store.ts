// The Postgres implementation of Store. Every call is bounded by STORE_TIMEOUT_MS and connection
// failures become StoreUnavailableError (a 503 with Retry-After), never a hang or a stack trace.
// Writes run in transactions that cannot outlive that deadline (see `write`), so a 503 on a write
// means "not applied", except for the one case the driver cannot know: a COMMIT sent and never
// answered, reported as WriteDeadlineError.
import postgres, { type PendingQuery, type Sql, type TransactionSql } from 'postgres';
import { ServiceError, StoreUnavailableError, WriteDeadlineError } from '../../core/errors.js';
import { withTimeout } from '../../core/support/deadline.js';
import { parsePostgresUrl } from '../../support/postgres-url.js';
import { classifyPostgresError, isConnectionFailure, toStoreError } from './errors.js';
import {
  type AgentCredentials,
  type AgentRecord,
  type AgentStatus,
  type AgentView,
  type GrantRecord,
  type PlatformInput,
  type PlatformRecord,
  type SecretHashes,
  type SigningKeyRow,
} from '../../core/model.js';
import type { LockOptions, SigningKeyWriter, Store } from '../../core/ports/store.js';
import type { AdminWrites } from '../../core/ports/unit-of-work.js';

export interface PostgresOptions {
  url: string;
  poolSize: number;
  timeoutMs: number;
  onHealth?: (up: boolean) => void;
  /** The embedded PGlite: one local server, nothing to fail over to, so no primary check at connect. */
  embedded?: boolean;
}

/**
 * A pool that works through a transaction-mode pooler and across a failover, with no pooler setting:
 * - no named prepared statements unless the URL says `prepare=true` (a direct connection): through
 *   PgBouncer each transaction may run on another server connection, which never saw the statement;
 * - no session state: settings are SET LOCAL (set_config(..., true)) and locks are transaction-scoped;
 * - `primary` session target: a server in recovery is detected when connecting and left for the next
 *   host of a multi-host URL, so nothing is ever written to a standby (libpq's `read-write` trusts
 *   default_transaction_read_only, which is off on a hot standby).
 */
export function connectPostgres(options: PostgresOptions): Sql {
  const { url, problems } = parsePostgresUrl(options.url);
  // The configuration refused a bad DATABASE_URL already; this is a programming error.
  if (!url) throw new Error(problems.join('; '));
  return postgres(url.driverUrl, {
    max: options.poolSize,
    connect_timeout: Math.max(1, Math.ceil(options.timeoutMs / 1000)),
    idle_timeout: 60,
    max_lifetime: 30 * 60,
    prepare: url.prepare,
    // Reconnect attempts back off up to 1 s (the driver's default grows to 20 s): after a failover the pool
    // must find the promoted primary within about a second, not after a long wait earned during the outage.
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1),
    ...(url.target === 'primary' && !options.embedded ? { target_session_attrs: 'primary' as const } : {}),
    onnotice: () => {},
    // Timestamps come back as ISO strings through toISOString() in the mappers below.
    transform: { undefined: null },
    connection: { application_name: 'agent-credential-exchange' },
  });
}

/** Thrown inside a transaction that reached its deadline, so that the driver rolls back instead of committing. */
class Abandoned extends Error {}

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
  resources: r.resources ?? [],
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
      const mapped = toStoreError(error);
      if (mapped instanceof StoreUnavailableError) this.options.onHealth?.(false);
      throw mapped;
    }
  }

  /**
   * Runs `fn` in a transaction bounded by the store deadline, on the server and here:
   * - the server cancels any statement or lock wait past the deadline (SET LOCAL statement_timeout and
   *   lock_timeout) and ends a session left idle inside the transaction (a client that vanished);
   * - here, at the deadline the transaction can no longer send a query nor reach COMMIT: whatever happens
   *   later, it rolls back. No CancelRequest is sent: it needs a new connection, the very thing that fails
   *   when the store is unreachable, and postgres.js drops the promise of a failed cancel (an unhandled
   *   rejection that ended the process when a black-holed connection was reset); the server's own
   *   statement and lock timeouts, equal to the deadline, end the statement instead.
   * So a failure is "not applied", except when COMMIT was already sent and did not answer within a short
   * grace: then the outcome is unknown and the error is WriteDeadlineError.
   * The store's own writes and the unit of work (unit-of-work.ts) run through here.
   */
  write<T>(fn: (tx: TransactionSql) => Promise<T>): Promise<T> {
    const { timeoutMs } = this.options;
    const graceMs = Math.min(1000, Math.ceil(timeoutMs / 2));
    let expired = false;
    let committing = false;
    const work = this.sql.begin(async (tx) => {
      if (expired) throw new Abandoned();
      await tx`
        SELECT set_config('statement_timeout', ${String(timeoutMs)}, true),
               set_config('lock_timeout', ${String(timeoutMs)}, true),
               set_config('idle_in_transaction_session_timeout', ${String(timeoutMs + graceMs)}, true)`;
      // Every query of `fn` goes through this proxy: none starts after the deadline.
      const tracked = new Proxy(tx, {
        apply: (target, self, args) => {
          if (expired) throw new Abandoned();
          return Reflect.apply(target, self, args) as PendingQuery<any>;
        },
      });
      const result = await fn(tracked);
      if (expired) throw new Abandoned(); // too late: the caller was told "not applied"
      committing = true;
      return result as T;
    }) as Promise<T>;
    // Whatever the caller was told, a late outcome must never surface as an unhandled rejection.
    const settled = work.then(() => undefined, () => undefined);

    return new Promise<T>((resolve, reject) => {
      const fail = (error: unknown) => {
        // Only a broken connection leaves a COMMIT's outcome unknown; any answer from the server is definite.
        if (committing && isConnectionFailure(error)) reject(new WriteDeadlineError('postgres', settled, error));
        else if (error instanceof Abandoned || classifyPostgresError(error) !== 'other') {
          reject(new StoreUnavailableError('postgres', error));
        } else reject(error);
      };
      const timer = setTimeout(() => {
        expired = true;
        if (!committing) {
          reject(new StoreUnavailableError('postgres', new Error(`write not done within ${timeoutMs} ms; rolled back`)));
          return;
        }
        // COMMIT is on its way: give it a moment, then admit that the outcome is unknown.
        const grace = setTimeout(
          () => reject(new WriteDeadlineError('postgres', settled, new Error(`COMMIT not answered within ${timeoutMs + graceMs} ms`))),
          graceMs,
        );
        void settled.then(() => clearTimeout(grace));
      }, timeoutMs);
      work.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error) => {
          clearTimeout(timer);
          fail(error);
        },
      );
    }).then(
      (value) => {
        this.options.onHealth?.(true);
        return value;
      },
      (error) => {
        if (error instanceof StoreUnavailableError) this.options.onHealth?.(false);
        throw error;
      },
    );
  }

  // Without a cache there is no invalidation to go by: the view is always read again after a check.
  getAgentView(apiKeyId: string): Promise<AgentView | null> {
    return this.run(async () => {
      const rows = await this.sql`
        SELECT a.id, a.api_key_id, a.status, g.platform_id, g.scopes, p.status AS platform_status
        FROM agents a
        LEFT JOIN grants g ON g.agent_id = a.id
        LEFT JOIN platforms p ON p.id = g.platform_id
        WHERE a.api_key_id = ${apiKeyId}`;
      return rows.length === 0 ? null : toAgentView(rows);
    });
  }

  getPlatform(platformId: string): Promise<PlatformRecord | null> {
    return this.run(() => adminSql(this.sql).getPlatform(platformId));
  }

  getSecretHashes(apiKeyId: string): Promise<SecretHashes | null> {
    return this.run(async () => {
      const [row] = await this.sql`
        SELECT id, secret_hash, previous_secret_hash, previous_secret_expires_at
        FROM agents WHERE api_key_id = ${apiKeyId}`;
      return row ? toSecretHashes(row) : null;
    });
  }

  getAgentCredentials(apiKeyId: string): Promise<AgentCredentials | null> {
    return this.run(async () => {
      // One statement, so the hashes and the view are one snapshot (one row per grant; the hashes repeat).
      const rows = await this.sql`
        SELECT a.id, a.api_key_id, a.status, a.secret_hash, a.previous_secret_hash, a.previous_secret_expires_at,
               g.platform_id, g.scopes, p.status AS platform_status
        FROM agents a
        LEFT JOIN grants g ON g.agent_id = a.id
        LEFT JOIN platforms p ON p.id = g.platform_id
        WHERE a.api_key_id = ${apiKeyId}`;
      return rows.length === 0 ? null : { hashes: toSecretHashes(rows[0]), view: toAgentView(rows) };
    });
  }

  createPlatform(input: PlatformInput): Promise<PlatformRecord> {
    return this.write((tx) => adminSql(tx).createPlatform(input));
  }

  updatePlatform(platformId: string, patch: Partial<PlatformInput>): Promise<PlatformRecord | null> {
    return this.write((tx) => adminSql(tx).updatePlatform(platformId, patch));
  }

  listPlatforms(): Promise<PlatformRecord[]> {
    return this.run(async () => (await this.sql`SELECT * FROM platforms ORDER BY created_at, id`).map(toPlatform));
  }

  /** api_key_ids of every agent holding a grant on the platform (for cache invalidation). */
  apiKeyIdsOnPlatform(platformId: string): Promise<string[]> {
    return this.run(() => adminSql(this.sql).apiKeyIdsOnPlatform(platformId));
  }

  createAgent(input: { name: string; apiKeyId: string; secretHash: string }): Promise<AgentRecord> {
    return this.write((tx) => adminSql(tx).createAgent(input));
  }

  getAgent(agentId: string): Promise<AgentRecord | null> {
    return this.run(() => adminSql(this.sql).getAgent(agentId));
  }

  listAgents(): Promise<AgentRecord[]> {
    return this.run(async () => (await this.sql`SELECT * FROM agents ORDER BY created_at, id`).map(toAgent));
  }

  updateAgent(agentId: string, patch: { name?: string; status?: AgentStatus }): Promise<AgentRecord | null> {
    return this.write((tx) => adminSql(tx).updateAgent(agentId, patch));
  }

  rotateSecret(agentId: string, secretHash: string, previousValidUntil: Date | null): Promise<AgentRecord | null> {
    return this.write((tx) => adminSql(tx).rotateSecret(agentId, secretHash, previousValidUntil));
  }

  putGrant(agentId: string, platformId: string, scopes: string[]): Promise<GrantRecord> {
    return this.write((tx) => adminSql(tx).putGrant(agentId, platformId, scopes));
  }

  deleteGrant(agentId: string, platformId: string): Promise<boolean> {
    return this.write((tx) => adminSql(tx).deleteGrant(agentId, platformId));
  }

  listGrants(agentId: string): Promise<GrantRecord[]> {
    return this.run(() => adminSql(this.sql).listGrants(agentId));
  }

  listSigningKeys(): Promise<SigningKeyRow[]> {
    return this.run(async () => (await this.sql`SELECT * FROM signing_keys ORDER BY activates_at, kid`).map(toKey));
  }

  withLock<T>(lock: string, wait: boolean, fn: (keys: SigningKeyWriter) => Promise<T>, options: LockOptions = {}): Promise<T | undefined> {
    // Transaction-scoped advisory lock: released by commit or rollback, even if this process dies.
    // Unbounded unless asked: key generation inside may take a moment at start-up or on a schedule.
    const inTransaction = (tx: TransactionSql) => this.lockAndRun(tx, lock, wait, fn);
    if (options.bounded) return this.write(inTransaction);
    return this.sql.begin(inTransaction) as Promise<T | undefined>;
  }

  private async lockAndRun<T>(tx: TransactionSql, lock: string, wait: boolean, fn: (keys: SigningKeyWriter) => Promise<T>): Promise<T | undefined> {
    if (wait) await tx`SELECT pg_advisory_xact_lock(hashtext(${lock}))`;
    else {
      const [{ locked }] = await tx`SELECT pg_try_advisory_xact_lock(hashtext(${lock})) AS locked`;
      if (!locked) return undefined;
    }
    return fn(keyWriter(tx));
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

/** The unique indexes that say "another platform holds this" (migration 005), as the admin API's 409. */
const HELD_ELSEWHERE: Record<string, string> = {
  platform_resources_pkey: 'A resource identifier in resources is registered to another platform.',
  platforms_verified_domain_idx: 'Another platform is verified for this domain.',
};

async function heldElsewhere<T>(statement: Promise<T>): Promise<T> {
  try {
    return await statement;
  } catch (error) {
    const { code, constraint_name: constraint } = error as { code?: unknown; constraint_name?: unknown };
    if (code === '23505' && typeof constraint === 'string' && Object.hasOwn(HELD_ELSEWHERE, constraint)) {
      throw new ServiceError('conflict', HELD_ELSEWHERE[constraint]);
    }
    throw error;
  }
}

/**
 * The admin writes, and the reads a change decides on, as statements on `sql`: a transaction (the store's
 * own `write`, or a unit of work) or, for the reads, the pool.
 */
export function adminSql(sql: Sql | TransactionSql): AdminWrites {
  return {
    async getPlatform(platformId) {
      const [row] = await sql`SELECT * FROM platforms WHERE id = ${platformId}`;
      return row ? toPlatform(row) : null;
    },
    async apiKeyIdsOnPlatform(platformId) {
      return (await sql`SELECT a.api_key_id FROM grants g JOIN agents a ON a.id = g.agent_id WHERE g.platform_id = ${platformId}`).map(
        (r) => r.api_key_id as string,
      );
    },
    async getAgent(agentId) {
      const [row] = await sql`SELECT * FROM agents WHERE id = ${agentId}`;
      return row ? toAgent(row) : null;
    },
    async listGrants(agentId) {
      return (await sql`SELECT * FROM grants WHERE agent_id = ${agentId} ORDER BY created_at, platform_id`).map(toGrant);
    },
    async createPlatform(input) {
      const [row] = await heldElsewhere(sql`
        INSERT INTO platforms (id, name, domain, status, verification_status, scopes, routes, resources)
        VALUES (${crypto.randomUUID()}, ${input.name}, ${input.domain}, ${input.status}, ${input.verificationStatus},
                ${sql.json(input.scopes as never)}, ${sql.json(input.routes as never)}, ${input.resources}::text[])
        RETURNING *`);
      return toPlatform(row);
    },
    async updatePlatform(platformId, patch) {
      const [current] = await sql`SELECT * FROM platforms WHERE id = ${platformId} FOR UPDATE`;
      if (!current) return null;
      const next = { ...toPlatform(current), ...patch };
      const [row] = await heldElsewhere(sql`
        UPDATE platforms SET
          name = ${next.name}, domain = ${next.domain}, status = ${next.status},
          verification_status = ${next.verificationStatus},
          scopes = ${sql.json(next.scopes as never)}, routes = ${sql.json(next.routes as never)},
          resources = ${next.resources}::text[],
          updated_at = now()
        WHERE id = ${platformId}
        RETURNING *`);
      if (patch.scopes) {
        // Dropped scopes leave every grant on this platform.
        const kept = patch.scopes.map((s) => s.name);
        await sql`
          UPDATE grants SET
            scopes = ARRAY(SELECT unnest(scopes) INTERSECT SELECT unnest(${kept}::text[]) ORDER BY 1),
            updated_at = now()
          WHERE platform_id = ${platformId} AND NOT (scopes <@ ${kept}::text[])`;
      }
      return toPlatform(row);
    },
    async createAgent(input) {
      const [row] = await sql`
        INSERT INTO agents (id, name, status, api_key_id, secret_hash)
        VALUES (${crypto.randomUUID()}, ${input.name}, 'active', ${input.apiKeyId}, ${input.secretHash})
        RETURNING *`;
      return toAgent(row);
    },
    async updateAgent(agentId, patch) {
      const [row] = await sql`
        UPDATE agents SET
          name = COALESCE(${patch.name ?? null}, name),
          status = COALESCE(${patch.status ?? null}, status),
          updated_at = now()
        WHERE id = ${agentId}
        RETURNING *`;
      return row ? toAgent(row) : null;
    },
    async rotateSecret(agentId, secretHash, previousValidUntil) {
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
    async putGrant(agentId, platformId, scopes) {
      const [row] = await sql`
        INSERT INTO grants (agent_id, platform_id, scopes)
        VALUES (${agentId}, ${platformId}, ${scopes}::text[])
        ON CONFLICT (agent_id, platform_id) DO UPDATE SET scopes = EXCLUDED.scopes, updated_at = now()
        RETURNING *`;
      return toGrant(row);
    },
    async deleteGrant(agentId, platformId) {
      const result = await sql`DELETE FROM grants WHERE agent_id = ${agentId} AND platform_id = ${platformId}`;
      return result.count > 0;
    },
  };
}

export function keyWriter(tx: TransactionSql): SigningKeyWriter {
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
