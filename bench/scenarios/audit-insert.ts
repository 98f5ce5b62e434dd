// What one audit row costs to insert, statement against statement: the trail's `jsonb_to_recordset`
// batch insert (src/adapters/postgres/audit-store.ts) against one `unnest` of an array per column, on the
// migrated schema, and the trail's statement on a copy without the two secondary indexes (what they cost
// per row: both are used by GET /admin/v1/events, docs/audit.md). Batches of token.issued events
// (1,000 agents, 50 platforms) are inserted one after the other on one connection of the service's own
// pool settings (prepare=false unless BENCH_PG_URL says otherwise), into today's partition of a scratch
// database. Per row: wall µs, the client's CPU µs (this process) and the Postgres backend's CPU µs (from
// /proc). Interleaved rounds (the order rotates), medians with min–max:
//   npm run bench -- --only audit-insert [--rounds 5] [--duration 3]
import { randomBytes, randomUUID } from 'node:crypto';
import postgres, { type Sql } from 'postgres';
import type { Scenario } from './types.js';
import type { BenchContext, ScenarioReport } from '../lib/context.js';
import { PG_ADMIN_URL } from '../lib/service.js';
import { cpuSeconds } from '../lib/cpu.js';
import { connectPostgres } from '../../src/adapters/postgres/connect.js';
import { migrate } from '../../src/adapters/postgres/migrate.js';
import { insertAuditEvents, PostgresAuditStore } from '../../src/adapters/postgres/audit-store.js';
import { auditEvents, type AuditEvent } from '../../src/core/audit/events.js';

export const auditInsert: Scenario = {
  name: 'audit-insert',
  title: 'µs per audit row (wall, client CPU, Postgres CPU): the trail\'s jsonb_to_recordset against unnest, and what the secondary indexes cost',
  byDefault: false,
  run: (ctx) => runAuditInsert(ctx),
};

const BATCH_SIZES = [16, 128];

/**
 * One Postgres array literal of text elements, each one quoted (so a comma, a brace or the word NULL in a
 * value stays inside its element: a damaged spool line fails its chunk, it never shifts a column) with
 * `"` and `\\` escaped; null is the unquoted NULL.
 */
function arrayLiteral(values: readonly (string | null)[]): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (i > 0) out += ',';
    out += v === null ? 'NULL' : `"${NEEDS_ESCAPE.test(v) ? v.replace(ESCAPED, '\\$&') : v}"`;
  }
  return `${out}}`;
}
const NEEDS_ESCAPE = /["\\]/;
const ESCAPED = /["\\]/g;

/**
 * The alternative measured: each column one array parameter (text built here, every element quoted and
 * escaped), unnested in step by ROWS FROM, and `data` one JSON array.
 */
async function insertUnnest(sql: Sql, events: AuditEvent[]): Promise<number> {
  if (events.length === 0) return 0;
  const n = events.length;
  const ids = new Array<string>(n);
  const ats = new Array<string>(n);
  const types = new Array<string>(n);
  const agents = new Array<string | null>(n);
  const platforms = new Array<string | null>(n);
  const kids = new Array<string | null>(n);
  const jtis = new Array<string | null>(n);
  const actors = new Array<string | null>(n);
  const addresses = new Array<string | null>(n);
  const data = new Array<AuditEvent['data']>(n);
  for (let i = 0; i < n; i++) {
    const e = events[i];
    ids[i] = e.id;
    ats[i] = new Date(e.at).toISOString();
    types[i] = e.type;
    agents[i] = e.agentId;
    platforms[i] = e.platformId;
    kids[i] = e.kid;
    jtis[i] = e.jti;
    actors[i] = e.actor;
    addresses[i] = e.clientAddress;
    data[i] = e.data;
  }
  const result = await sql`
    INSERT INTO audit_events (id, at, type, agent_id, platform_id, kid, jti, actor, client_address, data)
    SELECT id, at, type, agent_id, platform_id, kid, jti, actor, client_address, NULLIF(data, 'null'::jsonb)
    FROM ROWS FROM (
      unnest(${arrayLiteral(ids)}::text::uuid[]), unnest(${arrayLiteral(ats)}::text::timestamptz[]),
      unnest(${arrayLiteral(types)}::text::text[]), unnest(${arrayLiteral(agents)}::text::uuid[]),
      unnest(${arrayLiteral(platforms)}::text::uuid[]), unnest(${arrayLiteral(kids)}::text::text[]),
      unnest(${arrayLiteral(jtis)}::text::uuid[]), unnest(${arrayLiteral(actors)}::text::text[]),
      unnest(${arrayLiteral(addresses)}::text::text[]), jsonb_array_elements(${JSON.stringify(data)}::text::jsonb)
    ) AS r(id, at, type, agent_id, platform_id, kid, jti, actor, client_address, data)
    ON CONFLICT DO NOTHING`;
  return result.count;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const spread = (xs: number[]) => `${median(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)})`;

interface Arm {
  name: string;
  sql: Sql;
  insert: (sql: Sql, events: AuditEvent[]) => Promise<number>;
}

async function runAuditInsert(ctx: BenchContext): Promise<ScenarioReport> {
  const { rounds, duration: seconds } = ctx.opts;
  const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
  const names = [`ace_audit_ins_${randomBytes(4).toString('hex')}`, `ace_audit_ins_${randomBytes(4).toString('hex')}`];
  const pools: Sql[] = [];
  try {
    const urls: string[] = [];
    for (const name of names) {
      await admin.unsafe(`CREATE DATABASE ${name}`);
      const url = PG_ADMIN_URL.replace(/\/[^/?]*(\?|$)/, `/${name}$1`);
      const sql = connectPostgres({ url, poolSize: 1, timeoutMs: 5000 });
      await migrate(sql);
      await new PostgresAuditStore({ sql, readTimeoutMs: 5000 }).maintain(new Date(), 90, 1);
      pools.push(sql);
      urls.push(url);
    }
    // The second database prices the secondary indexes: the same schema without them.
    await pools[1]`DROP INDEX audit_events_agent_idx, audit_events_platform_idx`;
    const arms: Arm[] = [
      { name: 'jsonb_to_recordset', sql: pools[0], insert: insertAuditEvents },
      { name: 'unnest', sql: pools[0], insert: insertUnnest },
      { name: 'jsonb_to_recordset, primary key only', sql: pools[1], insert: insertAuditEvents },
    ];
    const backends = new Map<Sql, number>();
    for (const sql of pools) backends.set(sql, (await sql`SELECT pg_backend_pid() AS pid`)[0].pid as number);

    const agents = Array.from({ length: 1000 }, () => randomUUID());
    const platforms = Array.from({ length: 50 }, () => randomUUID());
    let k = 0;
    const batch = (n: number) =>
      Array.from({ length: n }, () => {
        k++;
        return auditEvents.tokenIssued({
          jti: randomUUID(),
          agentId: agents[k % agents.length],
          platformId: platforms[k % platforms.length],
          scope: 'orders:read orders:write',
          by: { method: 'client_secret' },
          kid: 'PBqVW_Ge17kUhGDJ3B_gN834j0N_-L6R0TuJpZfl58w',
          clientAddress: `10.12.${k % 250}.${k % 200}`,
        });
      });

    type Figures = { wall: number[]; client: number[]; server: number[] };
    const results: Record<string, Figures> = {};
    for (let r = 0; r < rounds; r++) {
      for (const size of BATCH_SIZES) {
        const order = arms.map((_, i) => arms[(i + r) % arms.length]);
        for (const arm of order) {
          // Batches built ahead: building events is the token path's cost, not the statement's.
          const ready = Array.from({ length: 64 }, () => batch(size));
          await arm.insert(arm.sql, batch(size)); // warm (plan, caches)
          const pid = backends.get(arm.sql)!;
          const server0 = cpuSeconds(pid);
          const client0 = process.cpuUsage();
          const t0 = performance.now();
          let rows = 0;
          let i = 0;
          let building = 0;
          while (performance.now() - t0 < seconds * 1000) {
            let events = ready[i++];
            if (!events) {
              const b0 = process.cpuUsage();
              events = batch(size);
              const b = process.cpuUsage(b0);
              building += b.user + b.system;
            }
            const inserted = await arm.insert(arm.sql, events);
            if (inserted !== size) throw new Error(`${arm.name}: ${inserted} of ${size} rows inserted`);
            rows += size;
          }
          const wall = (performance.now() - t0) * 1000;
          const client = process.cpuUsage(client0);
          const server = (cpuSeconds(pid) - server0) * 1e6;
          const figures = (results[`${arm.name} @ ${size}`] ??= { wall: [], client: [], server: [] });
          figures.wall.push(wall / rows);
          figures.client.push((client.user + client.system - building) / rows);
          figures.server.push(server / rows);
        }
      }
    }
    const lines = Object.entries(results).map(
      ([arm, f]) => `${arm.padEnd(32)} wall ${spread(f.wall).padEnd(20)} client CPU ${spread(f.client).padEnd(20)} Postgres CPU ${spread(f.server)}`,
    );
    const text = `µs per row, ${rounds} interleaved rounds of ${seconds} s per arm and batch size, medians (min–max):\n${lines.join('\n')}`;
    const data = Object.fromEntries(Object.entries(results).map(([arm, f]) => [arm, { wall_us: median(f.wall), client_cpu_us: median(f.client), postgres_cpu_us: median(f.server) }]));
    return { name: 'audit-insert', text: [text], checks: [], data };
  } finally {
    for (const sql of pools) await sql.end({ timeout: 2 });
    for (const name of names) await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}
