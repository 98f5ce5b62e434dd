// The Postgres unit of work: an admin change, its revocation entries and its audit event in
// one transaction of the store's pool, bounded by the store write deadline (PostgresStore.write): a
// StoreUnavailableError means nothing was applied, except the WriteDeadlineError of a COMMIT sent and
// never answered. The embedded PGlite default goes through the same code (it serves the same protocol).
// Effects queued with afterCommit (invalidation messages) run once COMMIT has answered.
import { runEffects, type Transaction, type UnitOfWork } from '../../core/ports/unit-of-work.js';
import { adminSql, keyWriter, type PostgresStore } from './postgres-store.js';
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
    const result = await this.store.write((sql) =>
      fn({
        store: adminSql(sql),
        revocationLog: {
          append: (target, expiresAt) => appendRevocation(sql, target, expiresAt),
          agentsHoldingScopes: (platformId, scopes) => agentsHoldingScopes(sql, platformId, scopes),
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
