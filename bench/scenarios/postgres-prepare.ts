// What `prepare: false` (the default since the service must work through a transaction-mode pooler)
// costs against named prepared statements on a direct connection: the cold path's one Postgres read
// (getAgentCredentials) and an admin write (a unit of work: one bounded transaction), through the real
// PostgresStore and PostgresUnitOfWork.
// Interleaved rounds, medians, on the server of BENCH_PG_URL:
//   npm run bench -- --only postgres-prepare [--rounds 5] [--duration 3]
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import type { Scenario } from './types.js';
import type { BenchContext, ScenarioReport } from '../lib/context.js';
import { PG_ADMIN_URL } from '../lib/service.js';
import { connectPostgres } from '../../src/adapters/postgres/connect.js';
import { PostgresStore } from '../../src/adapters/postgres/postgres-store.js';
import { PostgresUnitOfWork } from '../../src/adapters/postgres/unit-of-work.js';
import { migrate } from '../../src/adapters/postgres/migrate.js';

export const postgresPrepare: Scenario = {
  name: 'postgres-prepare',
  title: 'prepare: false against named prepared statements: the cold path\'s Postgres read and an admin write',
  byDefault: false,
  run: (ctx) => runPostgresPrepare(ctx),
};

const CONCURRENCY = 8;
const AGENTS = 1000;

/** Admin writes as the service makes them, without audit events (none is measured here). */
const unitOfWork = (store: PostgresStore) => new PostgresUnitOfWork(store, { recordAudit: false, onEffectFailure: () => {} });

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

async function measure(seconds: number, fn: () => Promise<unknown>): Promise<{ opsPerSecond: number; p50: number; p99: number }> {
  const latencies: number[] = [];
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        await fn();
        latencies.push(performance.now() - t);
      }
    }),
  );
  return { opsPerSecond: latencies.length / seconds, p50: pct(latencies, 0.5), p99: pct(latencies, 0.99) };
}

async function runPostgresPrepare(ctx: BenchContext): Promise<ScenarioReport> {
  const { rounds, duration: seconds } = ctx.opts;
  const adminUrl = PG_ADMIN_URL;
  const name = `ace_bench_${randomBytes(4).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  const url = adminUrl.replace(/\/[^/?]*(\?|$)/, `/${name}$1`);
  const withPrepare = (on: boolean) => `${url}${url.includes('?') ? '&' : '?'}prepare=${on}`;
  try {
    const seedSql = connectPostgres({ url, poolSize: 4, timeoutMs: 5000 });
    await migrate(seedSql);
    const seed = new PostgresStore(seedSql, { timeoutMs: 5000 });
    const seedWrites = unitOfWork(seed);
    const keys: string[] = [];
    const ids: string[] = [];
    for (let i = 0; i < AGENTS; i++) {
      const agent = await seedWrites.run((tx) => tx.store.createAgent({ name: `a${i}`, apiKeyId: `bench_kid_${i}`, secretHash: 'h' }));
      keys.push(agent.apiKeyId);
      ids.push(agent.id);
    }
    await seed.close();

    const results: Record<string, { read: number[]; readP99: number[]; write: number[]; writeP99: number[] }> = {};
    for (let r = 0; r < rounds; r++) {
      for (const on of r % 2 === 0 ? [true, false] : [false, true]) {
        const store = new PostgresStore(connectPostgres({ url: withPrepare(on), poolSize: CONCURRENCY, timeoutMs: 5000 }), { timeoutMs: 5000 });
        const uow = unitOfWork(store);
        await store.listAgents(); // connect the pool before measuring
        let i = 0;
        const read = await measure(seconds, () => store.getAgentCredentials(keys[i++ % keys.length]));
        const write = await measure(seconds, () => uow.run((tx) => tx.store.updateAgent(ids[i++ % ids.length], { name: `n${i}` })));
        await store.close();
        const entry = (results[on ? 'prepare=true' : 'prepare=false'] ??= { read: [], readP99: [], write: [], writeP99: [] });
        entry.read.push(read.opsPerSecond);
        entry.readP99.push(read.p99);
        entry.write.push(write.opsPerSecond);
        entry.writeP99.push(write.p99);
      }
    }
    const lines = Object.entries(results).map(
      ([mode, e]) =>
        `${mode.padEnd(14)} cold-path read ${median(e.read).toFixed(0)}/s (p99 ${median(e.readP99).toFixed(2)} ms)   admin write ${median(e.write).toFixed(0)}/s (p99 ${median(e.writeP99).toFixed(2)} ms)`,
    );
    return { name: 'postgres-prepare', text: [`${rounds} interleaved rounds of ${seconds} s, ${CONCURRENCY} concurrent callers, medians:\n${lines.join('\n')}`], checks: [], data: { results } };
  } finally {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}
