// The Postgres unit of work, the only write path: an admin change, its revocation entries and its audit
// event in one transaction of the store's pool, bounded by the store deadline (bounded.ts): a
// StoreUnavailableError means nothing was applied, except the WriteDeadlineError of a COMMIT sent and
// never answered. The embedded PGlite default goes through the same code (it serves the same protocol).
// Effects queued with afterCommit (invalidation messages) run once COMMIT has answered.
import type { TransactionSql } from 'postgres';
import { runEffects, type AdminWrites, type Transaction, type UnitOfWork } from '../../core/ports/unit-of-work.js';
import type { PostgresStore } from './postgres-store.js';
import { agentStatements } from './agents.js';
import { grantStatements } from './grants.js';
import { platformStatements } from './platforms.js';
import { keyWriter } from './signing-keys.js';
import { agentsHoldingScopes, appendRevocation } from './revocation-store.js';
import { insertAuditEvents } from './audit-store.js';
import { clientKeyWrites } from './client-key-store.js';
import { feedCredentialWrites } from './feed-credential-store.js';

export interface PostgresUnitOfWorkOptions {
  /** AUDIT=off: admin changes record no event either. */
  recordAudit: boolean;
  /** An effect that failed after the commit (the change stands; the failure is counted and logged). */
  onEffectFailure: (error: unknown) => void;
}

export class PostgresUnitOfWork implements UnitOfWork {
  constructor(
    private readonly store: PostgresStore,
    private readonly options: PostgresUnitOfWorkOptions,
  ) {}

  async run<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    const effects: (() => Promise<void>)[] = [];
    const { recordAudit } = this.options;
    const result = await this.store.transaction((sql) =>
      fn({
        store: adminWrites(sql),
        revocationLog: {
          append: (target, expiresAt) => appendRevocation(sql, target, expiresAt),
          agentsHoldingScopes: (platformId, scopes) => agentsHoldingScopes(sql, platformId, scopes),
          databaseNow: async () => {
            const [row] = await sql`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now`;
            return Number(row.now);
          },
        },
        audit: {
          insert: async (event) => {
            if (recordAudit) await insertAuditEvents(sql, [event]);
          },
        },
        keys: keyWriter(sql),
        feedCredentials: feedCredentialWrites(sql),
        clientKeys: clientKeyWrites(sql),
        // Transaction-scoped: released by COMMIT or ROLLBACK, even if this process dies; its wait is
        // bounded by the transaction's lock_timeout (the store deadline).
        lock: async (name) => {
          await sql`SELECT pg_advisory_xact_lock(hashtext(${name}))`;
        },
        afterCommit: (effect) => void effects.push(effect),
      }),
    );
    await runEffects(effects, this.options.onEffectFailure);
    return result;
  }
}

/** The admin writes, and the reads a change decides on, as the feature modules' statements on `tx`. */
function adminWrites(tx: TransactionSql): AdminWrites {
  const { getPlatform, createPlatform, updatePlatform } = platformStatements(tx);
  const { getAgent, createAgent, updateAgent, rotateSecret } = agentStatements(tx);
  const { listGrants, putGrant, deleteGrant, apiKeyIdsOnPlatform } = grantStatements(tx);
  return { getPlatform, createPlatform, updatePlatform, apiKeyIdsOnPlatform, getAgent, createAgent, updateAgent, rotateSecret, listGrants, putGrant, deleteGrant };
}
