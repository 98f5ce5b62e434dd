// The durable record of used client assertions (migration 007_used_assertion_jtis.sql): a claim is one
// statement, an insert that wins only if no live row holds the id. A row past its expiry no longer
// counts (Redis forgets its key then too) and is pruned on a timer. Bounded by the store timeout; a
// Postgres that cannot answer is a StoreUnavailableError.
import { createHash } from 'node:crypto';
import type { ReplayGuard } from '../../core/ports/assertions.js';
import { BoundedPostgres } from './bounded.js';

const digest = (id: string) => createHash('sha256').update(id).digest();

export class PostgresReplayGuard extends BoundedPostgres implements ReplayGuard {
  firstUse(id: string, rememberUntilMs: number): Promise<boolean> {
    return this.run(async () => {
      const rows = await this.sql`
        INSERT INTO used_assertion_jtis (id_digest, expires_at) VALUES (${digest(id)}, to_timestamp(${rememberUntilMs / 1000}))
        ON CONFLICT (id_digest) DO UPDATE SET expires_at = EXCLUDED.expires_at
          WHERE used_assertion_jtis.expires_at <= clock_timestamp()
        RETURNING 1`;
      return rows.length === 1;
    });
  }

  /** Deletes the rows no assertion can still need; resolves with how many. */
  pruneExpired(): Promise<number> {
    return this.run(async () => (await this.sql`DELETE FROM used_assertion_jtis WHERE expires_at <= clock_timestamp()`).count);
  }
}
