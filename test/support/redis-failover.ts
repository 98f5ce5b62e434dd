// The Redis failover harness, shared by test/e2e/redis-sentinel.test.ts and
// test/e2e/redis-cluster.test.ts against a real Sentinel group or Cluster from the topology kit: the suite's
// life cycle (failoverSuite: the topology, two service instances on one database and one Redis key
// prefix), the checks before a failover (topology reported, limits shared), the scenario (a warm agent's
// tokens asked for through both instances while a Redis master is killed and a replica promoted, an agent
// deactivated through one instance meanwhile) and the checks after it. Each suite only names its topology,
// how to kill a master and how to see the promotion.
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { AdminClient, postJson, type AgentCredentials } from '../../kit/admin.js';
import { createDatabase, runToExit, startService, type ServiceHandle, type TestDatabase } from './service.js';
import { stopAll } from '../../kit/topology/index.js';
import { metricSum } from '../../kit/metrics.js';
import { waitFor } from '../../kit/wait.js';

/** Token budget per api_key_id and minute: the shared-limit checks spend it exactly. */
export const TOKEN_POINTS = 300;
/** The token points an instance leases at once with that budget (RATE_LIMIT_TOKEN_LEASE's default, 32). */
const TOKEN_LEASE = 32;
/** The warm agent's load: always this many requests, well inside its budget (no 429 may blur the count). */
const LOAD_MAX = 240;
/** Of LOAD_MAX, kept for after the promotion (the new master under load, however long the failover). */
const LOAD_AFTER_PROMOTION = 40;
/** At least this many in all (the 99 % bound leaves room for one 503 only from 100 on). */
const LOAD_MIN = 100;

export interface Pair {
  a: ServiceHandle;
  b: ServiceHandle;
  database: TestDatabase;
  dispose(): Promise<void>;
}

/** Two instances on one fresh database and Redis key prefix, configured by `env` (the topology's settings). */
export async function startPair(env: Record<string, string>): Promise<Pair> {
  const database = await createDatabase();
  const redisKeyPrefix = `ace-failover-${randomBytes(4).toString('hex')}:`;
  const common = {
    mode: 'real' as const,
    database,
    redisKeyPrefix,
    env: {
      REDIS_URL: '',
      ...env,
      RATE_LIMIT_TOKEN_POINTS: String(TOKEN_POINTS),
      // A long in-process cache: the other instance keeps a deactivated agent's view for a minute unless
      // an invalidation (or a Redis reset) drops it, so the test sees whether one does.
      LOCAL_CACHE_TTL_MS: '60000',
    },
  };
  const [a, b] = await Promise.all([startService(common), startService(common)]);
  return {
    a,
    b,
    database,
    async dispose() {
      await Promise.all([a.dispose(), b.dispose()]);
      await database.drop();
    },
  };
}

export const tokenAt = (service: ServiceHandle, agent: AgentCredentials, platformId: string) =>
  postJson(`${service.publicUrl}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platformId });

export async function readyz(service: ServiceHandle): Promise<{ status: number; checks: Record<string, any> }> {
  const response = await fetch(`${service.adminUrl}/readyz`);
  return { status: response.status, checks: ((await response.json()) as { checks: Record<string, any> }).checks };
}

export const metricsOf = async (service: ServiceHandle) => (await fetch(`${service.adminUrl}/metrics`)).text();

/**
 * Spends one fresh agent's whole budget through both instances, alternately, 6 requests at a time:
 * returns how many were answered 200 (shared limits: TOKEN_POINTS; per instance it would be twice that).
 */
export async function sharedBudget(pair: Pair, agent: AgentCredentials, platformId: string): Promise<{ ok: number; limited: number; other: number[] }> {
  // One cold check per instance first (argon2), so the burst below is all warm.
  const counts = { ok: 0, limited: 0, other: [] as number[] };
  const note = (status: number) => (status === 200 ? counts.ok++ : status === 429 ? counts.limited++ : counts.other.push(status));
  note((await tokenAt(pair.a, agent, platformId)).status);
  note((await tokenAt(pair.b, agent, platformId)).status);
  let sent = 2;
  const total = TOKEN_POINTS + 10;
  await Promise.all(
    Array.from({ length: 6 }, async () => {
      while (sent < total) {
        const service = sent++ % 2 === 0 ? pair.a : pair.b;
        note((await tokenAt(service, agent, platformId)).status);
      }
    }),
  );
  return counts;
}

export interface Outcome {
  load: { status: number; retryAfter: string | null }[];
  /**
   * ms from the promotion being seen to the sending of the last request the other instance answered 200
   * for the deactivated agent (negative: none sent after the promotion was served).
   */
  lastVictimTokenAfterPromotionMs: number;
  acknowledged: AgentCredentials[];
}

/**
 * The scenario: warm agents, load, `kill()` (the master dies), a deactivation and agent creations through
 * instance A while Redis is failing over, `promoted()` (resolves once the replica serves), more load.
 *
 * What it measures does not depend on how loaded the machine is: the warm agent's load is at least
 * LOAD_MIN requests (a slow machine sends fewer in the same time, and 1 % of too few leaves no room for
 * one 503), LOAD_AFTER_PROMOTION of them kept for after the promotion; a victim's request counts from when
 * it was sent (a 200 that was slow to arrive under load was served before the deactivation reached B, not
 * after), and the victim is asked slowly until the promotion (a long failover must not spend its token
 * budget: a 429 would hide both a stale 200 and the 403).
 */
export async function runFailover(
  pair: Pair,
  kill: () => Promise<void>,
  promoted: () => Promise<void>,
): Promise<Outcome & { platformId: string; admin: AdminClient }> {
  const admin = new AdminClient(pair.a);
  const platform = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'orders:read' }] });
  const platformId = platform.platform_id;
  const agent = async (name: string) => {
    const created = await admin.createAgent(name);
    await admin.grant(created.agent_id, platformId, ['orders:read']);
    return created;
  };
  const warm = await agent('warm');
  const victim = await agent('victim');
  // Warm both at both instances (the first token of each is the cold argon2 check).
  for (const service of [pair.a, pair.b]) {
    expect((await tokenAt(service, warm, platformId)).status).toBe(200);
    expect((await tokenAt(service, victim, platformId)).status).toBe(200);
  }

  const load: Outcome['load'] = [];
  const victimAtB: { sentAt: number; status: number }[] = [];
  let running = true;
  let sent = 0;
  let promotedAt: number | undefined;
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const loadClient = async () => {
    while (running && sent < LOAD_MAX) {
      // Until the promotion is seen, LOAD_AFTER_PROMOTION requests stay unspent: load on the new master.
      if (promotedAt === undefined && sent >= LOAD_MAX - LOAD_AFTER_PROMOTION) {
        await pause(20);
        continue;
      }
      const service = sent++ % 2 === 0 ? pair.a : pair.b;
      const response = await tokenAt(service, warm, platformId);
      load.push({ status: response.status, retryAfter: response.headers.get('retry-after') });
      // Paced so the load spans the failover without spending the agent's budget.
      await pause(40);
    }
  };
  const victimWatch = async () => {
    while (running) {
      const sentAt = Date.now();
      const response = await tokenAt(pair.b, victim, platformId);
      victimAtB.push({ sentAt, status: response.status });
      // Fine-grained from the promotion on: that is when the 1 s bound is measured.
      await pause(promotedAt === undefined ? 250 : 20);
    }
  };
  // A request that fails at the socket (a service that died) ends its loop; the checks see the gap.
  const clients = [loadClient(), loadClient(), victimWatch()].map((c) => c.catch((error: Error) => load.push({ status: 0, retryAfter: error.message })));
  try {
    return await scenario();
  } finally {
    running = false;
    await Promise.allSettled(clients);
  }

  async function scenario() {
    await waitFor('some load before the kill', () => load.length >= 20, 20_000, 20);

    const killedAt = Date.now();
    await kill();
    // While Redis has no master: the deactivation (Postgres commits it; the cache delete and the publish
    // fail) and new agents, each acknowledged.
    await admin.patchAgent(victim.agent_id, { status: 'inactive' });
    const acknowledged: AgentCredentials[] = [];
    for (let i = 0; i < 3; i++) acknowledged.push(await agent(`during-failover-${i}`));
    await promoted();
    const seenAt = Date.now();
    promotedAt = seenAt;
    const loadAtPromotion = load.length;
    const timeline = () => victimAtB.filter((v) => v.sentAt >= seenAt - 3000).map((v) => `${v.sentAt - seenAt}:${v.status}`);
    // B must stop serving the victim soon after; then the rest of the load, on the new master.
    await waitFor('B to refuse the deactivated agent', () => victimAtB.some((v) => v.sentAt > seenAt && v.status === 403), 10_000, 20).catch((error) => {
      const t = timeline();
      throw new Error(`${(error as Error).message}; victim at B (ms from promotion:status): ${t.slice(0, 40).join(' ')} ... ${t.slice(-10).join(' ')}`);
    });
    await waitFor(
      'load on the new master',
      () => sent >= LOAD_MAX || (load.length - loadAtPromotion >= LOAD_AFTER_PROMOTION && load.length >= LOAD_MIN),
      60_000,
      20,
    );
    running = false;
    await Promise.all(clients);

    const lastOk = Math.max(...victimAtB.filter((v) => v.status === 200).map((v) => v.sentAt));
    const failed = load.filter((l) => l.status !== 200);
    console.info(
      `failover: ${load.length} tokens (${failed.length} not 200${failed.length ? `: ${failed.map((l) => l.status).join(',')}` : ''}), ` +
        `no master seen for ${seenAt - killedAt} ms, last 200 for the victim at B sent ${lastOk - seenAt} ms after the promotion; ` +
        `victim at B (ms from promotion:status): ${timeline().slice(0, 30).join(' ')}`,
    );
    return { load, lastVictimTokenAfterPromotionMs: lastOk - seenAt, acknowledged, platformId, admin };
  }
}

/** The checks every topology shares once runFailover returned. */
export async function expectFailoverOutcome(pair: Pair, outcome: Awaited<ReturnType<typeof runFailover>>, topology: string): Promise<void> {
  const { load, platformId, admin } = outcome;
  // >= 99 % of the warm agent's tokens answered 200; the rest 503 with Retry-After, nothing else.
  const ok = load.filter((l) => l.status === 200).length;
  const others = load.filter((l) => l.status !== 200);
  expect(load.length).toBeGreaterThan(50);
  expect(ok / load.length, JSON.stringify(others.slice(0, 5))).toBeGreaterThanOrEqual(0.99);
  for (const o of others) {
    expect(o.status).toBe(503);
    expect(Number(o.retryAfter)).toBeGreaterThanOrEqual(1);
  }
  // The deactivation through A was refused at B within 1 s after the failover.
  expect(outcome.lastVictimTokenAfterPromotionMs).toBeLessThanOrEqual(1000);

  // Both instances back on Redis, cache trusted again, the new master reported.
  for (const service of [pair.a, pair.b]) {
    let seen = '';
    await waitFor(`${service.adminUrl}: Redis up and the cache trusted after the failover`, async () => {
      const text = await metricsOf(service);
      const ready = await readyz(service);
      seen = JSON.stringify({ up: metricSum(text, 'ace_store_up', { store: 'redis' }), trusted: metricSum(text, 'ace_redis_cache_trusted'), checks: ready.checks });
      return metricSum(text, 'ace_store_up', { store: 'redis' }) === 1 && metricSum(text, 'ace_redis_cache_trusted') === 1 && ready.checks.redis === true;
    }, 20_000).catch((error: Error) => {
      throw new Error(`${error.message}: last seen ${seen}`);
    });
    const ready = await readyz(service);
    expect(ready.status).toBe(200);
    expect(ready.checks.redis_topology).toMatchObject({ topology, cache: 'in use' });
    expect(metricSum(await metricsOf(service), 'ace_redis_topology_info', { topology })).toBeGreaterThanOrEqual(1);
  }
  // The failed cache delete and publish during the outage were counted, not swallowed.
  expect(metricSum(await metricsOf(pair.a), 'ace_redis_failures_total')).toBeGreaterThan(0);

  // Nothing acknowledged is lost: the agents created during the failover get tokens through B, and the
  // deactivated one stays refused at both.
  for (const created of outcome.acknowledged) expect((await tokenAt(pair.b, created, platformId)).status).toBe(200);
  const listed = (await admin.request('GET', '/admin/v1/agents')).body;
  const list = (Array.isArray(listed) ? listed : Object.values(listed).find(Array.isArray)) as { name: string; status: string }[];
  expect(list.find((a) => a.name === 'victim')?.status).toBe('inactive');

  // Limits are shared on the new master(s) too.
  const fresh = await admin.createAgent('after-failover');
  await admin.grant(fresh.agent_id, platformId, ['orders:read']);
  expectShared(await sharedBudget(pair, fresh, platformId));
}

/**
 * One budget for both instances: never more than TOKEN_POINTS tokens, and at most one lease fewer (the
 * other instance may hold unspent leased points: docs/decisions.md, Leased limits); per instance it would be twice.
 */
function expectShared(counts: { ok: number; limited: number; other: number[] }): void {
  expect(counts.other).toEqual([]);
  expect(counts.ok).toBeLessThanOrEqual(TOKEN_POINTS);
  expect(counts.ok).toBeGreaterThanOrEqual(TOKEN_POINTS - TOKEN_LEASE);
  expect(counts.limited).toBe(TOKEN_POINTS + 10 - counts.ok);
}

/**
 * Before any failover: Redis ready at A with `topology` (its masters `primaries`, the cache in use), B's
 * topology metric as `metric` says, and one agent's token budget shared by both instances.
 */
export async function expectTopologyAndSharedLimits(
  pair: Pair,
  topology: { topology: string; primaries: string[] },
  metric: { labels: Record<string, string>; value: number },
): Promise<void> {
  const ready = await readyz(pair.a);
  expect(ready.checks.redis).toBe(true);
  expect(ready.checks.redis_topology).toMatchObject({ ...topology, cache: 'in use' });
  expect(metricSum(await metricsOf(pair.b), 'ace_redis_topology_info', metric.labels)).toBe(metric.value);

  const admin = new AdminClient(pair.a);
  const { platform, agent } = await admin.seed(['orders:read']);
  expectShared(await sharedBudget(pair, agent, platform.platform_id));
}

/** A start-up the topology's settings in `env` cannot work with: the process exits non-zero, naming each of `names`. */
export async function expectStartRefused(pair: Pair, env: Record<string, string>, names: string[]): Promise<void> {
  const run = await runToExit({ ...pair.a.env, ...env, PORT: '0', ADMIN_PORT: '0' });
  expect(run.code).not.toBe(0);
  for (const name of names) expect(run.output).toContain(name);
}

/**
 * The suite's life cycle, registered on the enclosing describe: `start` brings up the topology and returns
 * the settings that point the service at it; two instances are started on them; both and the topology are
 * stopped after the suite; a failed test prints what the instances logged (no secret is logged; see
 * docs/operations.md).
 */
export function failoverSuite<T>(start: () => Promise<{ topology: T; env: Record<string, string> }>): { readonly topology: T; readonly pair: Pair; readonly env: Record<string, string> } {
  let started: { topology: T; env: Record<string, string> } | undefined;
  let pair: Pair | undefined;
  beforeAll(async () => {
    started = await start();
    pair = await startPair(started.env);
  }, 90_000);
  afterAll(async () => {
    await pair?.dispose();
    await stopAll();
  });
  afterEach((context) => {
    if (context.task.result?.state === 'fail' && pair) console.log(`A:\n${pair.a.output().slice(-3000)}\nB:\n${pair.b.output().slice(-3000)}`);
  });
  const ready = <V>(value: V | undefined): V => {
    if (value === undefined) throw new Error('failoverSuite: the suite has not started (beforeAll failed?)');
    return value;
  };
  return {
    get topology() {
      return ready(started).topology;
    },
    get env() {
      return ready(started).env;
    },
    get pair() {
      return ready(pair);
    },
  };
}
