// Rolling restart: three instances of one deployment (one database, one Redis key prefix, one
// key-encryption key) behind a round-robin balancer, a fleet of agents asking for tokens at a steady
// rate, and each instance in turn taken out of rotation, stopped (SIGTERM), started afresh and put back.
// Twice: with the verified-secret memory in Redis as the fleet left it, then after flushing it (the worst
// case: every agent a fresh instance meets needs argon2, which its warm-up line absorbs). Reports, for
// each, the argon2 verifications the restart cost per agent (ace_credential_checks_total of every
// process, old and new, over the restart) and every answer that was not a 200. The argon2 queue keeps
// the service's defaults (ARGON2_MAX_QUEUE 64, ARGON2_MAX_PER_ADDRESS 4) and each agent has its own
// address (X-Forwarded-For), as behind an Ingress: a fresh instance that had to verify every agent again
// would answer 503 for a full queue. Agents are bulk rows sharing one secret (bulk.ts).
import { hashSync } from '@node-rs/argon2';
import type { Scenario } from './types.js';
import type { BenchContext, ScenarioReport } from '../lib/context.js';
import { REDIS_URL, sharedStores, startBenchService, type BenchService } from '../lib/service.js';
import { deleteRedisKeys } from '../../kit/stores.js';
import { BulkAgents } from '../lib/bulk.js';
import { Workload, BULK_SECRET, TOKEN_PATH } from '../lib/workload.js';
import { loadArgon2Options } from '../limits/argon2-options.js';
import { check, checkRows, CHECK_HEADER } from '../lib/checks.js';
import { table, fmt } from '../lib/report.js';
import { sleep } from '../../kit/wait.js';

export const rolling: Scenario = {
  name: 'rolling',
  title: 'rolling restart of three instances under a fleet: argon2 verifications per agent and non-200 answers',
  byDefault: false,
  run: (ctx) => ctx.scoped((defer) => runRolling(ctx, defer)),
};

const INSTANCES = 3;
/** Time each restarted instance serves before the next one goes. */
const SETTLE_MS = 3000;

async function argon2Checks(service: BenchService): Promise<number> {
  const text = await (await fetch(`${service.adminUrl}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith('ace_credential_checks_total')) sum += Number(line.split(' ').pop());
  return sum;
}

function detailOf(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error_code?: string; detail?: string };
    return `${parsed.error_code ?? ''}: ${parsed.detail ?? ''}`;
  } catch {
    return body.slice(0, 60);
  }
}

async function runRolling(ctx: BenchContext, defer: (fn: () => Promise<void> | void) => void): Promise<ScenarioReport> {
  const { opts } = ctx;
  if (opts.embedded) return { name: 'rolling', text: ['rolling: skipped (--embedded: one process owns the data directory)'], checks: [], data: {} };
  const n = opts.rollingAgents;
  const stores = await sharedStores();
  defer(() => stores.drop());
  const start = () =>
    startBenchService({
      embedded: false,
      uvThreads: opts.uvThreads,
      shared: stores,
      env: { ARGON2_MAX_QUEUE: '64', ARGON2_MAX_PER_ADDRESS: '4', TRUST_PROXY_HOPS: '1', WORKERS: '1' },
    });
  ctx.log(`rolling: starting ${INSTANCES} instances on one database and Redis prefix ...`);
  const live: BenchService[] = [];
  defer(async () => {
    for (const service of live) await service.dispose();
  });
  for (let i = 0; i < INSTANCES; i++) live.push(await start());
  const work = new Workload(ctx, live[0]);
  await work.seed(1);
  const { options } = await loadArgon2Options();
  const bulk = new BulkAgents(stores.database.url, hashSync(BULK_SECRET, options));
  defer(() => bulk.end());
  await bulk.add(n, 'rolling');
  const bodies = (await bulk.apiKeyIds('rolling')).map((id) => JSON.stringify({ api_key_id: id, secret: BULK_SECRET, platform_id: work.platformId }));

  // The balancer: round robin over the instances in rotation.
  const rotation: BenchService[] = [...live];
  let turn = 0;
  /** Answers by status, and why the non-200 ones were refused (the error body's detail), of the current phase. */
  let phase = { statuses: new Map<string, number>(), details: new Map<string, number>() };
  const count = (key: string) => phase.statuses.set(key, (phase.statuses.get(key) ?? 0) + 1);
  const send = async (index: number) => {
    const target = rotation[turn++ % rotation.length];
    try {
      const response = await fetch(`${target.publicUrl}${TOKEN_PATH}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': `10.${(index >> 16) & 255}.${(index >> 8) & 255}.${index & 255}` },
        body: bodies[index],
      });
      const text = await response.text();
      count(String(response.status));
      const detail = `${response.status} ${detailOf(text)}`;
      if (response.status !== 200) phase.details.set(detail, (phase.details.get(detail) ?? 0) + 1);
    } catch (error) {
      count(`network ${(error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name}`);
    }
  };

  ctx.log(`rolling: ${n} agents get a token once (warm-up, spread over the instances) ...`);
  for (let i = 0; i < n; i += 16) await Promise.all(bodies.slice(i, i + 16).map((_, k) => send(i + k)));
  const warmup = phase.statuses;

  // A steady fleet: `rollingRate` requests a second, agents in turn, never more than 256 outstanding.
  let running = true;
  let outstanding = 0;
  let sent = 0;
  const fleet = (async () => {
    const started = performance.now();
    while (running) {
      const due = Math.floor(((performance.now() - started) / 1000) * opts.rollingRate);
      while (sent < due && outstanding < 256) {
        const index = sent++ % n;
        outstanding++;
        void send(index).finally(() => outstanding--);
      }
      await sleep(5);
    }
    while (outstanding > 0) await sleep(5);
  })();

  /** One rolling restart under the fleet: its answers, and the argon2 verifications of every process over it. */
  const roll = async (label: string) => {
    phase = { statuses: new Map(), details: new Map() };
    let checks = 0;
    for (const service of live) checks -= await argon2Checks(service);
    const restartStarted = performance.now();
    for (let i = 0; i < INSTANCES; i++) {
      const old = live[i];
      ctx.log(`rolling (${label}): restarting instance ${i + 1}/${INSTANCES} ...`);
      rotation.splice(rotation.indexOf(old), 1);
      await sleep(200); // requests already sent to it finish
      checks += await argon2Checks(old);
      await old.dispose();
      const fresh = await start();
      live[i] = fresh;
      rotation.push(fresh);
      await sleep(SETTLE_MS);
    }
    const seconds = (performance.now() - restartStarted) / 1000;
    const { statuses, details } = phase;
    // Answers still on their way count in no phase: a few at most.
    phase = { statuses: new Map(), details: new Map() };
    for (const service of live) checks += await argon2Checks(service);
    const answers = [...statuses.values()].reduce((a, b) => a + b, 0);
    return { label, seconds, checks, perAgent: checks / n, answers, non200: answers - (statuses.get('200') ?? 0), statuses, details };
  };
  const kept = await roll('memory kept');
  ctx.log('rolling: flushing the verified-secret memory in Redis (every instance keeps its own) ...');
  await deleteRedisKeys(REDIS_URL, `${stores.redisKeyPrefix}v:`);
  const flushed = await roll('memory flushed');
  running = false;
  await fleet;

  const list = (m: Map<string, number>) => [...m].sort().map(([s, c]) => `${s}×${c}`).join(' ');
  const result = [
    check('argon2 verifications per agent over the rolling restart', [kept.perAgent], { op: '<=', value: 0.1 }),
    check('non-200 answers during the rolling restart', [kept.non200], { op: '=', value: 0 }),
    check('non-200 answers during the rolling restart after a flush of the shared memory', [flushed.non200], { op: '=', value: 0 }),
  ];
  const rows = [
    ['agents / instances', `${fmt(n)} / ${INSTANCES}`],
    ['fleet rate req/s (target)', fmt(opts.rollingRate)],
    ['warm-up answers', list(warmup)],
    ...[kept, flushed].flatMap((r) => [
      [`${r.label}: restart duration s / answers`, `${fmt(r.seconds, 1)} / ${fmt(r.answers)}`],
      [`${r.label}: argon2 verifications (all processes) / per agent`, `${fmt(r.checks)} / ${fmt(r.perAgent, 3)}`],
      [`${r.label}: answers by status`, list(r.statuses)],
      [`${r.label}: non-200 answers`, fmt(r.non200)],
      ...[...r.details].map(([detail, c]) => [`  ×${c}`, detail.slice(0, 100)]),
    ]),
  ];
  const data = (r: typeof kept) => ({ answers: r.answers, non200: r.non200, argon2_checks: r.checks, argon2_per_agent: r.perAgent, statuses: Object.fromEntries(r.statuses), restart_s: r.seconds });
  return {
    name: 'rolling',
    text: [`rolling restart (${INSTANCES} instances, ${n} agents, ${opts.rollingRate} req/s; one run):`, table(rows, ['rolling restart', 'value']), table(checkRows(result), CHECK_HEADER)],
    checks: result,
    data: { agents: n, instances: INSTANCES, rate: opts.rollingRate, kept: data(kept), flushed: data(flushed) },
  };
}
