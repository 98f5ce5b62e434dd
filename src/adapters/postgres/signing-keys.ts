// Signing keys (table signing_keys): read by every instance, written only under the cluster lock.
import type { Sql, TransactionSql } from 'postgres';
import type { SigningKeyRow } from '../../core/model.js';
import type { SigningKeyWriter } from '../../core/ports/store.js';
import type { Row } from './rows.js';

const toKey = (r: Row): SigningKeyRow => ({
  kid: r.kid,
  publicJwk: r.public_jwk,
  privateKeyEncrypted: r.private_key_encrypted,
  createdAt: new Date(r.created_at),
  activatesAt: new Date(r.activates_at),
  retiredAt: r.retired_at ? new Date(r.retired_at) : null,
});

export async function listSigningKeys(sql: Sql | TransactionSql): Promise<SigningKeyRow[]> {
  return (await sql`SELECT * FROM signing_keys ORDER BY activates_at, kid`).map(toKey);
}

/** The writes on `tx`, a transaction holding the lock (PostgresStore.withLock, or a unit of work). */
export function keyWriter(tx: TransactionSql): SigningKeyWriter {
  return {
    listSigningKeys: () => listSigningKeys(tx),
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
