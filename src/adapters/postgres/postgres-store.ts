// The Postgres implementation of Store, composed of the feature modules' statements on the pool. Every call
// is bounded by STORE_TIMEOUT_MS (bounded.ts). Records change only in a unit of work (unit-of-work.ts),
// which runs its transaction through `transaction` here.
import type { Sql, TransactionSql } from 'postgres';
import type { LockOptions, SigningKeyWriter, Store } from '../../core/ports/store.js';
import { boundedCall, boundedTransaction, type Bounds } from './bounded.js';
import { agentStatements } from './agents.js';
import { grantStatements } from './grants.js';
import { platformStatements } from './platforms.js';
import { keyWriter, listSigningKeys } from './signing-keys.js';

export class PostgresStore implements Store {
  private readonly agents: ReturnType<typeof agentStatements>;
  private readonly platforms: ReturnType<typeof platformStatements>;
  private readonly grants: ReturnType<typeof grantStatements>;

  constructor(
    private readonly sql: Sql,
    private readonly bounds: Bounds,
  ) {
    this.agents = agentStatements(sql);
    this.platforms = platformStatements(sql);
    this.grants = grantStatements(sql);
  }

  private call<T>(fn: () => Promise<T>): Promise<T> {
    return boundedCall(this.bounds, fn);
  }

  /** Runs `fn` in a transaction of this pool bounded by the store deadline (see boundedTransaction). */
  transaction<T>(fn: (tx: TransactionSql) => Promise<T>): Promise<T> {
    return boundedTransaction(this.sql, this.bounds, fn);
  }

  getAgentView(apiKeyId: string) {
    return this.call(() => this.agents.getAgentView(apiKeyId));
  }

  getPlatform(platformId: string) {
    return this.call(() => this.platforms.getPlatform(platformId));
  }

  getSecretHashes(apiKeyId: string) {
    return this.call(() => this.agents.getSecretHashes(apiKeyId));
  }

  getAgentCredentials(apiKeyId: string) {
    return this.call(() => this.agents.getAgentCredentials(apiKeyId));
  }

  listPlatforms() {
    return this.call(() => this.platforms.listPlatforms());
  }

  getAgent(agentId: string) {
    return this.call(() => this.agents.getAgent(agentId));
  }

  listAgents() {
    return this.call(() => this.agents.listAgents());
  }

  listGrants(agentId: string) {
    return this.call(() => this.grants.listGrants(agentId));
  }

  listSigningKeys() {
    return this.call(() => listSigningKeys(this.sql));
  }

  withLock<T>(lock: string, wait: boolean, fn: (keys: SigningKeyWriter) => Promise<T>, options: LockOptions = {}): Promise<T | undefined> {
    // Transaction-scoped advisory lock: released by commit or rollback, even if this process dies.
    // Unbounded unless asked: key generation inside may take a moment at start-up or on a schedule.
    const inTransaction = async (tx: TransactionSql): Promise<T | undefined> => {
      if (wait) await tx`SELECT pg_advisory_xact_lock(hashtext(${lock}))`;
      else {
        const [{ locked }] = await tx`SELECT pg_try_advisory_xact_lock(hashtext(${lock})) AS locked`;
        if (!locked) return undefined;
      }
      return fn(keyWriter(tx));
    };
    if (options.bounded) return this.transaction(inTransaction);
    return this.sql.begin(inTransaction) as Promise<T | undefined>;
  }

  ping(): Promise<void> {
    return this.call(async () => {
      await this.sql`SELECT 1`;
    });
  }

  async close(): Promise<void> {
    await this.sql.end({ timeout: 2 });
  }
}
