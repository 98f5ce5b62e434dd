// Cost guard: Redis commands and Postgres transactions per token, counted on a Redis server and a
// database only this suite's service uses, and held to the budgets of issue 39 (docs/testing.md#cost-guards):
// a warm token (64 requests at a time, agents whose secrets this instance verified) at most 0.25 Redis
// commands and 0.05 Postgres transactions; a first token of a fresh agent (argon2) at most 6 and 2.
//
// How it counts:
// - Redis: `INFO commandstats` before and after, per command; the INFO calls of this suite's own
//   connection (one per reading, counted after it answers) are taken out.
// - Postgres: `pg_stat_database.xact_commit + xact_rollback` of the service's database, read from another
//   database. A backend reports its counts when it finishes a transaction at least 1 s after its last report,
//   else once it has been idle 10 s (PGSTAT_MIN_INTERVAL / PGSTAT_IDLE_INTERVAL in PG15), and at exit: a reading
//   waits until every backend of the database has reported past the phase's end (pg_stat_activity:
//   idle for over 10 s, or a transaction ended over 1 s after that moment).
// - Background work (the audit writer's and the pollers' timers, prunes, the bus heartbeat) goes on during
//   a phase: its rate, measured over an idle window of its own before the phases, is taken out per second of
//   the phase. The audit rows of the phase's tokens are not background: they stay in.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import postgres from 'postgres';
import { AdminClient, postJson, type AgentCredentials } from '../../kit/admin.js';
import { metricSum } from '../../kit/metrics.js';
import { startRedis, type RedisServer } from '../../kit/topology/index.js';
import { parseInfo } from '../../kit/topology/redis.js';
import { sleep, waitFor } from '../../kit/wait.js';
import { createDatabase, PG_ADMIN_URL, startService, type ServiceHandle, type TestDatabase } from '../support/service.js';

const BUDGET = { warm: { redis: 0.25, postgres: 0.05 }, cold: { redis: 6, postgres: 2 } };
/** Requests in flight at once on the warm path (issue 39: "counted at 64 requests at a time"). */
const CONCURRENCY = 64;
/** Warm agents, and tokens each asks for: several hundred warm tokens in all. */
const WARM_AGENTS = 32;
const TOKENS_PER_WARM_AGENT = 32;
/** Warm rounds at most: the Postgres budget must hold in one of them (see the warm test). */
const WARM_ROUNDS = 3;
/** Fresh agents whose first token is counted, this many at a time (one address's share of the argon2 queue). */
const COLD_AGENTS = 32;
const COLD_CONCURRENCY = 4;
/** Cold rounds at most (see the cold test). */
const COLD_ROUNDS = 3;

/** PG15: a backend idle this long has reported its counts (PGSTAT_IDLE_INTERVAL, 10 s, and a margin). */
const IDLE_REPORTED_MS = 10_500;
/** PG15: a transaction that ends this long after the last report reports at its end (PGSTAT_MIN_INTERVAL, 1 s). */
const MIN_INTERVAL_MS = 1_100;

interface Reading {
  at: number;
  commands: Map<string, number>;
  xacts: number;
  /** Audit batches (group commits) the service wrote so far. */
  auditBatches: number;
}

interface Cost {
  redis: number;
  postgres: number;
  /** Redis commands of the phase by name, background taken out (rounded). */
  byCommand: Record<string, number>;
}

describe('round trips per token', { timeout: 300_000 }, () => {
  let redis: RedisServer;
  let counter: Redis;
  let pg: postgres.Sql;
  let database: TestDatabase;
  let service: ServiceHandle;
  let platformId: string;
  let warmAgents: AgentCredentials[];
  /** Fresh agents for each cold round. */
  let coldAgents: AgentCredentials[][];
  /** INFO calls this suite made on `counter` so far. */
  let ownInfoCalls = 0;

  const token = (agent: AgentCredentials) =>
    postJson(`${service.publicUrl}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platformId });

  async function commandStats(): Promise<Map<string, number>> {
    const text = await counter.info('commandstats');
    ownInfoCalls++;
    const calls = new Map<string, number>();
    for (const [key, value] of Object.entries(parseInfo(text))) {
      const name = key.replace(/^cmdstat_/, '');
      const count = Number(/(?:^|,)calls=(\d+)/.exec(value)?.[1] ?? 0);
      calls.set(name, count);
    }
    // Every earlier INFO of ours is counted by now (a command's call is counted after it answers).
    calls.set('info', (calls.get('info') ?? 0) - (ownInfoCalls - 1));
    return calls;
  }

  async function xacts(): Promise<number> {
    await pg`select pg_stat_clear_snapshot()`;
    const [row] = await pg`select xact_commit + xact_rollback as n from pg_stat_database where datname = ${database.name}`;
    return Number(row.n);
  }

  /** Waits until every backend of the service's database has reported its counts up to `since` (ms), then reads. */
  async function readingAfter(since: number): Promise<Reading> {
    await waitFor(
      'the backends of the database to report their transaction counts',
      async () => {
        const rows = await pg`
          select state, extract(epoch from state_change) * 1000 as changed, extract(epoch from now()) * 1000 as now
          from pg_stat_activity where datname = ${database.name} and pid <> pg_backend_pid()`;
        return rows.every((row) => {
          if (row.state !== 'idle') return false;
          const changed = Number(row.changed);
          return Number(row.now) - changed > IDLE_REPORTED_MS || changed - since > MIN_INTERVAL_MS;
        });
      },
      60_000,
      200,
    );
    const at = Date.now();
    const [commands, count] = [await commandStats(), await xacts()];
    // Read last: whatever serving /metrics costs falls in the next interval, as it does for every interval.
    const metrics = await (await fetch(`${service.adminUrl}/metrics`)).text();
    return { at, commands, xacts: count, auditBatches: metricSum(metrics, 'ace_audit_batch_size_count') };
  }

  /** The cost of `count` tokens between two readings, the background's rate over `idle` taken out. */
  function cost(before: Reading, after: Reading, count: number, idle: { before: Reading; after: Reading }): Cost {
    const seconds = (after.at - before.at) / 1000;
    const idleSeconds = (idle.after.at - idle.before.at) / 1000;
    const byCommand: Record<string, number> = {};
    let redisTotal = 0;
    for (const [name, calls] of after.commands) {
      const background = (((idle.after.commands.get(name) ?? 0) - (idle.before.commands.get(name) ?? 0)) / idleSeconds) * seconds;
      const own = calls - (before.commands.get(name) ?? 0) - background;
      redisTotal += own;
      if (Math.abs(own) >= 0.5) byCommand[name] = Math.round(own * 10) / 10;
    }
    const pgBackground = ((idle.after.xacts - idle.before.xacts) / idleSeconds) * seconds;
    return { redis: Math.max(0, redisTotal) / count, postgres: Math.max(0, after.xacts - before.xacts - pgBackground) / count, byCommand };
  }

  async function inBatches<T>(items: T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(concurrency, items.length) }, async () => {
        while (next < items.length) await fn(items[next++]);
      }),
    );
  }

  const issued = async (agent: AgentCredentials) => {
    const answer = await token(agent);
    expect(answer.status, answer.text).toBe(200);
  };

  let idle: { before: Reading; after: Reading };

  beforeAll(async () => {
    redis = await startRedis();
    counter = new Redis(redis.port, redis.host, { maxRetriesPerRequest: 1 });
    counter.on('error', () => {});
    await counter.ping();
    pg = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
    database = await createDatabase();
    // Default settings but for the Redis server and two argon2 threads (the harness's default is one): what a
    // 2-core machine runs by default, so that first tokens can finish together (and share an audit batch).
    // The pollers (key set, revocation heads, each once a second) stay at their defaults: a steady background
    // whose rate the idle window measures well (slowed to 30 s, their rounds fell into a phase or not).
    // AUDIT_FLUSH_MAX_MS 200 (default 50): a batch under load may wait for twice the last one for at most this
    // long. On a machine busy with other suites (CI) a request takes ~250 ms at 64 in flight, and in 50 ms only
    // ~12 events arrive, so batches (and transactions per token) would follow the machine's speed, not the
    // code; on a quiet machine the default gives 0.024-0.046 transactions per warm token (docs/testing.md).
    service = await startService({ mode: 'real', database, env: { REDIS_URL: redis.url(), ARGON2_THREADS: '2', AUDIT_FLUSH_MAX_MS: '200' } });
    const admin = new AdminClient(service);
    const platform = await admin.createPlatform({ name: 'Shop', domain: 'shop.example.com', scopes: [{ name: 'orders:read', description: 'read' }] });
    platformId = platform.platform_id;
    const make = async (n: number, name: string) => {
      const agents: AgentCredentials[] = [];
      for (let i = 0; i < n; i++) {
        const agent = await admin.createAgent(`${name}-${i}`);
        await admin.grant(agent.agent_id, platformId, ['orders:read']);
        agents.push(agent);
      }
      return agents;
    };
    warmAgents = await make(WARM_AGENTS, 'warm');
    coldAgents = [];
    for (let round = 1; round <= COLD_ROUNDS; round++) coldAgents.push(await make(COLD_AGENTS, `cold-${round}`));
    // Warm: each warm agent's secret verified once (argon2) by this instance.
    await inBatches(warmAgents, COLD_CONCURRENCY, issued);

    // The background's rate, over a window of its own (about as long as a phase with its wait for the counts).
    const setUp = Date.now();
    const before = await readingAfter(setUp);
    await sleep(10_000); // pacing: the idle window is a stretch of time, not a condition
    const after = await readingAfter(Date.now());
    idle = { before, after };
    const seconds = (after.at - before.at) / 1000;
    const commands = [...after.commands].reduce((sum, [name, calls]) => sum + calls - (before.commands.get(name) ?? 0), 0);
    console.log(`background over ${seconds.toFixed(1)} s of idle: ${after.xacts - before.xacts} Postgres transactions, ${commands} Redis commands`);
  });

  afterAll(async () => {
    await service?.dispose();
    await database?.drop();
    counter?.disconnect();
    await pg?.end();
    await redis?.destroy();
  });

  // The audit rows of warm tokens share group commits whose size follows the load: on a machine busy with
  // other suites a round can see smaller batches. Redis commands are counted the same in every round and must
  // hold in each; the Postgres budget must hold in one of up to WARM_ROUNDS rounds (a round trip added per
  // token, 1.0 or more, fails them all).
  it('a warm token costs at most 0.25 Redis commands and 0.05 Postgres transactions', async () => {
    const requests = warmAgents.flatMap((agent) => Array.from({ length: TOKENS_PER_WARM_AGENT }, () => agent));
    const rounds: Cost[] = [];
    for (let round = 1; round <= WARM_ROUNDS; round++) {
      const before = await readingAfter(Date.now());
      const started = Date.now();
      await inBatches(requests, CONCURRENCY, issued);
      const ms = Date.now() - started;
      const after = await readingAfter(Date.now());
      const warm = cost(before, after, requests.length, idle);
      rounds.push(warm);
      console.log(
        `warm round ${round}: ${requests.length} tokens, ${CONCURRENCY} at a time, in ${ms} ms: ${warm.redis.toFixed(3)} Redis commands and ${warm.postgres.toFixed(3)} Postgres transactions per token ` +
          `(budget ${BUDGET.warm.redis} and ${BUDGET.warm.postgres}); ${after.auditBatches - before.auditBatches} audit batches; Redis commands of the phase: ${JSON.stringify(warm.byCommand)}`,
      );
      expect(warm.redis).toBeLessThanOrEqual(BUDGET.warm.redis);
      if (warm.postgres <= BUDGET.warm.postgres) break;
    }
    expect(Math.min(...rounds.map((r) => r.postgres))).toBeLessThanOrEqual(BUDGET.warm.postgres);
  });

  // First tokens share audit batches less on a busy machine (4 at a time): as for warm tokens, Redis must hold
  // in every round, Postgres in one of up to COLD_ROUNDS, each with agents of its own.
  it('a first token of a fresh agent costs at most 6 Redis commands and 2 Postgres transactions', async () => {
    const rounds: Cost[] = [];
    for (const [index, agents] of coldAgents.entries()) {
      const before = await readingAfter(Date.now());
      await inBatches(agents, COLD_CONCURRENCY, issued);
      const after = await readingAfter(Date.now());
      const cold = cost(before, after, agents.length, idle);
      rounds.push(cold);
      console.log(
        `cold round ${index + 1}: ${agents.length} first tokens, ${COLD_CONCURRENCY} at a time: ${cold.redis.toFixed(2)} Redis commands and ${cold.postgres.toFixed(2)} Postgres transactions per token ` +
          `(budget ${BUDGET.cold.redis} and ${BUDGET.cold.postgres}); ${after.auditBatches - before.auditBatches} audit batches; Redis commands of the phase: ${JSON.stringify(cold.byCommand)}`,
      );
      expect(cold.redis).toBeLessThanOrEqual(BUDGET.cold.redis);
      if (cold.postgres <= BUDGET.cold.postgres) break;
    }
    expect(Math.min(...rounds.map((r) => r.postgres))).toBeLessThanOrEqual(BUDGET.cold.postgres);
  });

});
