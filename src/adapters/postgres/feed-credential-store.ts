// Postgres implementation of the feed credentials' storage (migration 004_feed_credentials.sql). Reads are
// bounded by the store timeout; connection failures become StoreUnavailableError (503 + Retry-After).
import type { Sql, TransactionSql } from 'postgres';
import { BoundedPostgres } from './bounded.js';
import type { FeedCredential, FeedCredentialRecord, FeedCredentialStore, FeedCredentialWrites } from '../../core/ports/feed-credentials.js';

type Row = Record<string, any>;

const toCredential = (r: Row): FeedCredential => ({ id: r.id, platformId: r.platform_id, createdAt: new Date(r.created_at) });
const toRecord = (r: Row): FeedCredentialRecord => ({ ...toCredential(r), tokenHash: Buffer.from(r.token_hash).toString('hex') });

export class PostgresFeedCredentialStore extends BoundedPostgres implements FeedCredentialStore {
  listFeedCredentials(platformId: string): Promise<FeedCredential[]> {
    return this.run(() => feedCredentialWrites(this.sql).listFeedCredentials(platformId));
  }

  allFeedCredentials(): Promise<FeedCredentialRecord[]> {
    return this.run(async () => (await this.sql<Row[]>`SELECT id, platform_id, token_hash, created_at FROM feed_credentials`).map(toRecord));
  }

  feedCredentialsOf(platformId: string): Promise<FeedCredentialRecord[]> {
    return this.run(async () =>
      (await this.sql<Row[]>`SELECT id, platform_id, token_hash, created_at FROM feed_credentials WHERE platform_id = ${platformId}`).map(toRecord),
    );
  }
}

/** The writes on the transaction of an admin change (unit-of-work.ts); the listing also reads the pool. */
export function feedCredentialWrites(sql: Sql | TransactionSql): FeedCredentialWrites {
  return {
    async insertFeedCredential(row) {
      await sql`INSERT INTO feed_credentials (id, platform_id, token_hash, created_at)
        VALUES (${row.id}, ${row.platformId}, ${Buffer.from(row.tokenHash, 'hex')}, ${row.createdAt})`;
    },
    async deleteFeedCredential(platformId, id) {
      const rows = await sql`DELETE FROM feed_credentials WHERE platform_id = ${platformId} AND id = ${id} RETURNING id`;
      return rows.length > 0;
    },
    async listFeedCredentials(platformId) {
      return (await sql<Row[]>`SELECT id, platform_id, created_at FROM feed_credentials WHERE platform_id = ${platformId} ORDER BY created_at, id`).map(toCredential);
    },
  };
}
