// Bulk rows for the scale check. 100,000 agents through the admin API would take most of an hour of
// argon2 hashing, so the extra rows go straight into Postgres with one INSERT ... SELECT over
// generate_series. The statement is built from the live catalogue of the `agents` table rather than a
// hard-coded column list: every column is copied from a real (template) agent, except that
//  - single-column unique/primary-key columns get fresh values (uuid: gen_random_uuid(); text: the
//    template's text with its last 32 characters replaced by random hex, which keeps an api_key_id-like
//    "<prefix><32 hex>" shape), or their own default when they have one (identity/serial);
//  - generated columns are left out; `name` becomes "<label>-<n>"; non-null columns holding a hash
//    (…hash…) get one argon2id hash computed by the bench with the pool's own parameters.
// Each bulk agent also gets a copy of one real grant row (when `grants` exists), as real agents have one.
// Every bulk agent thus shares one known secret (BULK_SECRET) under its own api_key_id, so the bench can
// use them as agents never seen before: the service verifies and remembers credentials per api_key_id,
// so a shared secret gives it no shortcut (each first request still costs one argon2 verification).
// Rows go in by chunks of INSERT ... SELECT over generate_series (one statement per chunk).
import postgres from 'postgres';

const TABLE = 'agents';
const GRANTS = 'grants';

interface Column {
  name: string;
  type: string;
  hasDefault: boolean;
  identity: string;
  generated: string;
  unique: boolean;
}

export class BulkAgents {
  private readonly sql: postgres.Sql;

  constructor(databaseUrl: string, private readonly secretHash: string) {
    this.sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  }

  async count(): Promise<number> {
    const [row] = await this.sql.unsafe(`SELECT count(*)::int AS n FROM ${TABLE}`);
    return row.n as number;
  }

  private async columns(): Promise<Column[]> {
    const rows = await this.sql`
      SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, a.atthasdef AS has_default,
             a.attidentity AS identity, a.attgenerated AS generated,
             EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisunique
                       AND i.indnatts = 1 AND i.indkey[0] = a.attnum) AS is_unique
      FROM pg_attribute a
      WHERE a.attrelid = ${TABLE}::regclass AND a.attnum > 0 AND NOT a.attisdropped
      ORDER BY a.attnum`;
    return rows.map((r) => ({
      name: r.name,
      type: r.type,
      hasDefault: r.has_default,
      identity: r.identity,
      generated: r.generated,
      unique: r.is_unique,
    }));
  }

  /** Adds `n` rows named `<label>-<i>` copied from an existing agent (at least one real agent must exist). */
  async add(n: number, label = 'bulk', chunk = 250_000): Promise<void> {
    for (let done = 0; done < n; done += chunk) await this.addChunk(Math.min(chunk, n - done), label, done);
    await this.sql.unsafe(`ANALYZE ${TABLE}`);
    if (await this.grantColumns()) await this.sql.unsafe(`ANALYZE ${GRANTS}`);
  }

  /** api_key_ids of the rows a call to add() made with `label` (in random order). */
  async apiKeyIds(label: string): Promise<string[]> {
    const rows = await this.sql.unsafe(`SELECT api_key_id FROM ${TABLE} WHERE name LIKE $1 ORDER BY random()`, [`${label}-%`]);
    return rows.map((r) => r.api_key_id as string);
  }

  /** `n` random api_key_ids among the rows labelled `label`, none of `exclude`. */
  async sample(label: string, n: number, exclude: ReadonlySet<string> = new Set()): Promise<string[]> {
    const rows = await this.sql.unsafe(`SELECT api_key_id FROM ${TABLE} WHERE name LIKE $1 ORDER BY random() LIMIT $2`, [`${label}-%`, n + exclude.size]);
    return rows.map((r) => r.api_key_id as string).filter((id) => !exclude.has(id)).slice(0, n);
  }

  private async addChunk(n: number, label: string, offset: number): Promise<void> {
    if (n <= 0) return;
    const columns = await this.columns();
    const names: string[] = [];
    const values: string[] = [];
    for (const column of columns) {
      if (column.generated !== '' || column.identity === 'a') continue;
      const id = ident(column.name);
      let value: string;
      if (column.unique) {
        if (column.type === 'uuid') value = 'gen_random_uuid()';
        else if (/^(text|character varying|character)/.test(column.type)) {
          value = `left(t.${id}, greatest(length(t.${id}) - 32, 0)) || md5(random()::text || g::text || clock_timestamp()::text)`;
        } else if (column.hasDefault || column.identity !== '') continue;
        else throw new Error(`cannot make unique values for ${TABLE}.${column.name} (${column.type})`);
      } else if (column.name === 'name') {
        value = `${literal(label + '-')} || (g + ${Math.floor(offset)})::text`;
      } else if (/hash/i.test(column.name) && /^(text|character varying)/.test(column.type)) {
        value = `CASE WHEN t.${id} IS NULL THEN NULL ELSE ${literal(this.secretHash)} END`;
      } else {
        value = `t.${id}`;
      }
      names.push(id);
      values.push(value);
    }
    const insertAgents = `INSERT INTO ${TABLE} (${names.join(', ')})
       SELECT ${values.join(', ')}
       FROM (SELECT * FROM ${TABLE} LIMIT 1) t CROSS JOIN generate_series(1, ${Math.floor(n)}) g`;
    // Real agents come with a grant; give each bulk agent a copy of one, so `grants` grows alongside.
    const grantColumns = await this.grantColumns();
    if (grantColumns) {
      const rest = grantColumns.filter((c) => c !== 'agent_id').map(ident);
      const [pk] = columns.filter((c) => c.unique && c.type === 'uuid').map((c) => ident(c.name));
      await this.sql.unsafe(
        `WITH fresh AS (${insertAgents} RETURNING ${pk} AS agent_id)
         INSERT INTO ${GRANTS} (agent_id, ${rest.join(', ')})
         SELECT fresh.agent_id, ${rest.map((c) => `t.${c}`).join(', ')}
         FROM fresh CROSS JOIN (SELECT * FROM ${GRANTS} LIMIT 1) t`,
      );
    } else {
      await this.sql.unsafe(insertAgents);
    }
  }

  /** Columns of `grants` when it exists, has an agent_id column and holds a row to copy; else undefined. */
  private async grantColumns(): Promise<string[] | undefined> {
    const [exists] = await this.sql`SELECT to_regclass(${GRANTS}) IS NOT NULL AS ok`;
    if (!exists.ok) return undefined;
    const rows = await this.sql`
      SELECT a.attname AS name FROM pg_attribute a
      WHERE a.attrelid = ${GRANTS}::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
      ORDER BY a.attnum`;
    const names = rows.map((r) => r.name as string);
    const [any] = await this.sql.unsafe(`SELECT count(*)::int AS n FROM (SELECT 1 FROM ${GRANTS} LIMIT 1) x`);
    return names.includes('agent_id') && any.n > 0 ? names : undefined;
  }

  /** Lets Postgres catch up after bulk writes (statistics, dirty pages), so no measurement pays for it. */
  async settle(): Promise<void> {
    await this.sql.unsafe('VACUUM ANALYZE');
    await this.sql.unsafe('CHECKPOINT').catch(() => {}); // needs superuser; fine to skip
  }

  /** Names of the tables and columns seen, for the report. */
  async describe(): Promise<string> {
    return (await this.columns()).map((c) => `${c.name}:${c.type}${c.unique ? '(unique)' : ''}`).join(', ');
  }

  end(): Promise<void> {
    return this.sql.end();
  }
}

const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;
const literal = (text: string) => `'${text.replace(/'/g, "''")}'`;
