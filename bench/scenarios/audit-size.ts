// `npm run bench -- --only audit-size [--audit-events N]`: what the audit trail occupies on disk per event
// at volume. Loads N token.issued events (default 1,000,000; 1,000 agents, 50 platforms, addresses and scopes like
// real ones) into one daily partition of a scratch database made from migration 002, vacuums, and
// divides heap + TOAST + indexes by the rows. The scratch database is dropped afterwards.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import type { Scenario } from './types.js';
import type { BenchContext, ScenarioReport } from '../lib/context.js';
import { PG_ADMIN_URL } from '../lib/service.js';

const MIGRATION = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src/adapters/postgres/migrations/002_audit.sql');

export const auditSize: Scenario = {
  name: 'audit-size',
  title: 'audit trail bytes per event on disk at volume (--audit-events, default 1,000,000 token.issued events in one daily partition)',
  byDefault: false,
  run: (ctx) => runAuditSize(ctx),
};

async function runAuditSize(ctx: BenchContext): Promise<ScenarioReport> {
  const events = ctx.opts.auditEvents;
  ctx.log(`loading ${events} token.issued events into a scratch database ...`);
  const name = `ace_audit_size_${randomBytes(4).toString('hex')}`;
  const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  const sql = postgres(PG_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`), { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(readFileSync(MIGRATION, 'utf8'));
    const day = new Date().toISOString().slice(0, 10);
    await sql.unsafe(`CREATE TABLE audit_events_p1 PARTITION OF audit_events FOR VALUES FROM ('${day}') TO ('${day}'::date + 1)`);
    await sql.unsafe(`
      CREATE TEMP TABLE a AS SELECT i, gen_random_uuid() AS id FROM generate_series(0, 999) i;
      CREATE TEMP TABLE p AS SELECT i, gen_random_uuid() AS id FROM generate_series(0, 49) i;
      INSERT INTO audit_events (id, at, type, agent_id, platform_id, kid, jti, actor, client_address, data)
      SELECT gen_random_uuid(), '${day}'::timestamptz + g * (interval '86400 s' / ${events}), 'token.issued', a.id, p.id,
             'PBqVW_Ge17kUhGDJ3B_gN834j0N_-L6R0TuJpZfl58w', gen_random_uuid(), NULL,
             '10.12.' || (g % 250) || '.' || (g % 200), jsonb_build_object('scope', 'orders:read orders:write')
      FROM generate_series(1, ${events}) g JOIN a ON a.i = g % 1000 JOIN p ON p.i = g % 50`);
    await sql.unsafe('VACUUM ANALYZE audit_events');
    const [size] = await sql`
      SELECT sum(pg_total_relation_size(relid))::bigint AS total, sum(pg_relation_size(relid))::bigint AS heap,
             sum(pg_indexes_size(relid))::bigint AS indexes
      FROM pg_partition_tree('audit_events')`;
    const [{ n }] = await sql`SELECT count(*)::bigint AS n FROM audit_events`;
    const perEvent = Number(size.total) / Number(n);
    const data = {
      events: Number(n),
      bytes_per_event: Math.round(perEvent),
      heap_bytes_per_event: Math.round(Number(size.heap) / Number(n)),
      index_bytes_per_event: Math.round(Number(size.indexes) / Number(n)),
      gib_per_day_at_100m_events: +((perEvent * 100e6) / 2 ** 30).toFixed(1),
      tib_at_90_days: +((perEvent * 100e6 * 90) / 2 ** 40).toFixed(2),
    };
    return { name: 'audit-size', text: [`Audit trail on disk (${events} token.issued events)\n${JSON.stringify(data, null, 2)}`], checks: [], data };
  } finally {
    await sql.end();
    await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}
