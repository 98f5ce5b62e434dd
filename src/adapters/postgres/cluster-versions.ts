// The cluster-version gate's source: every instance names itself and its capability level in the
// application_name of its Postgres connections, so pg_stat_activity lists the live instances and what they
// can read, old releases included (they connect as plain 'agent-credential-exchange', no level: level 1)
// without any cooperation from them. A process that dies loses its connections, so nothing goes stale
// (behind PgBouncer an idle server connection keeps the last name until it is reused or times out: the
// gate then waits longer, never opens early).
import type { Sql } from 'postgres';
import type { ClusterVersions } from '../../core/ports/cluster-versions.js';
import { CAPABILITY_CLIENT_KEYS } from '../../core/ports/cluster-versions.js';
import { boundedCall } from './bounded.js';

const NAME = 'agent-credential-exchange';
/** This build's level: what it can read. */
export const INSTANCE_LEVEL = CAPABILITY_CLIENT_KEYS;
/** The application_name of this build's connections. */
export const APPLICATION_NAME = `${NAME}/${INSTANCE_LEVEL}`;

export interface PostgresClusterVersionsOptions {
  sql: Sql;
  timeoutMs: number;
}

export class PostgresClusterVersions implements ClusterVersions {
  private readonly options: PostgresClusterVersionsOptions;

  constructor(options: PostgresClusterVersionsOptions) {
    this.options = options;
  }

  olderThan(level: number): Promise<number> {
    const { sql, timeoutMs } = this.options;
    return boundedCall({ timeoutMs }, async () => {
      const rows = await sql<{ name: string }[]>`
        SELECT application_name AS name FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid()
          AND (application_name = ${NAME} OR application_name LIKE ${`${NAME}/%`})`;
      return rows.filter((row) => levelOf(row.name) < level).length;
    });
  }
}

/** The level an application_name says: none (an older release) is 1; an unreadable one counts as old. */
export function levelOf(name: string): number {
  if (name === NAME) return 1;
  const level = Number(name.slice(NAME.length + 1));
  return Number.isInteger(level) && level > 0 ? level : 1;
}
