// Platforms (table platforms): the statements on `sql`, the pool for reads or a unit of work's transaction.
import type { Sql, TransactionSql } from 'postgres';
import { ServiceError } from '../../core/errors.js';
import type { PlatformInput, PlatformRecord } from '../../core/model.js';
import { iso, type Row } from './rows.js';

export const toPlatform = (r: Row): PlatformRecord => ({
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

export function platformStatements(sql: Sql | TransactionSql) {
  return {
    async getPlatform(platformId: string): Promise<PlatformRecord | null> {
      const [row] = await sql`SELECT * FROM platforms WHERE id = ${platformId}`;
      return row ? toPlatform(row) : null;
    },
    async listPlatforms(): Promise<PlatformRecord[]> {
      return (await sql`SELECT * FROM platforms ORDER BY created_at, id`).map(toPlatform);
    },
    async createPlatform(input: PlatformInput): Promise<PlatformRecord> {
      const [row] = await heldElsewhere(sql`
        INSERT INTO platforms (id, name, domain, status, verification_status, scopes, routes, resources)
        VALUES (${crypto.randomUUID()}, ${input.name}, ${input.domain}, ${input.status}, ${input.verificationStatus},
                ${sql.json(input.scopes as never)}, ${sql.json(input.routes as never)}, ${input.resources}::text[])
        RETURNING *`);
      return toPlatform(row);
    },
    async updatePlatform(platformId: string, patch: Partial<PlatformInput>): Promise<PlatformRecord | null> {
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
  };
}
