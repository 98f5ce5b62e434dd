// Rolling restart: three instances of one deployment (one database, one Redis key prefix, one
// key-encryption key) behind a round-robin balancer, a fleet of agents asking for tokens at a steady
// rate, and each instance in turn taken out of rotation, stopped (SIGTERM), started afresh and put back.
// Reports the argon2 verifications the restart cost per agent (ace_credential_checks_total of every
// process, old and new, over the restart) and every answer that was not a 200. The argon2 queue keeps
// the service's defaults (ARGON2_MAX_QUEUE 64, ARGON2_MAX_PER_ADDRESS 4) and each agent has its own
// address (X-Forwarded-For), as behind an Ingress: a fresh instance that had to verify every agent again
// would answer 503 for a full queue. Agents are bulk rows sharing one secret (bulk.ts).
import { hashSync } from '@node-rs/argon2';
import type { Scenario } from './types.js';
import type { BenchContext, ScenarioReport } from '../lib/context.js';
import { sharedStores, startBenchService, type BenchService } from '../lib/service.js';
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
  const statuses = new Map<string, number>();
  /** Why the non-200 answers were refused (the error body's detail). */
  const details = new Map<string, number>();
  const count = (key: string) => statuses.set(key, (statuses.get(key) ?? 0) + 1);
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
      if (response.status !== 200) details.set(`${response.status} ${detailOf(text)}`, (details.get(`${response.status} ${detailOf(text)}`) ?? 0) + 1);
    } catch (error) {
      count(`network ${(error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name}`);
    }
  };

  ctx.log(`rolling: ${n} agents get a token once (warm-up, spread over the instances) ...`);
  for (let i = 0; i < n; i += 16) await Promise.all(bodies.slice(i, i + 16).map((_, k) => send(i + k)));
  const warmup = new Map(statuses);
  statuses.clear();

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

  let checks = 0;
  for (const service of live) checks -= await argon2Checks(service);
  const restartStarted = performance.now();
  for (let i = 0; i < INSTANCES; i++) {
    const old = live[i];
    ctx.log(`rolling: restarting instance ${i + 1}/${INSTANCES} ...`);
    rotation.splice(rotation.indexOf(old), 1);
    await sleep(200); // requests already sent to it finish
    checks += await argon2Checks(old);
    await old.dispose();
    const fresh = await start();
    live[i] = fresh;
    rotation.push(fresh);
    await sleep(SETTLE_MS);
  }
  const restartSeconds = (performance.now() - restartStarted) / 1000;
  running = false;
  await fleet;
  for (const service of live) checks += await argon2Checks(service);

  const answers = [...statuses.values()].reduce((a, b) => a + b, 0);
  const non200 = answers - (statuses.get('200') ?? 0);
  const perAgent = checks / n;
  const list = (m: Map<string, number>) => [...m].sort().map(([s, c]) => `${s}×${c}`).join(' ');
  const result = [
    check('argon2 verifications per agent over the rolling restart', [perAgent], { op: '<=', value: 0.1 }),
    check('non-200 answers during the rolling restart', [non200], { op: '=', value: 0 }),
  ];
  const rows = [
    ['agents / instances', `${fmt(n)} / ${INSTANCES}`],
    ['fleet rate req/s (target) / answers', `${fmt(opts.rollingRate)} / ${fmt(answers)}`],
    ['warm-up answers', list(warmup)],
    ['restart duration s', fmt(restartSeconds, 1)],
    ['argon2 verifications (all processes) / per agent', `${fmt(checks)} / ${fmt(perAgent, 3)}`],
    ['answers by status', list(statuses)],
    ['non-200 answers', fmt(non200)],
    ...[...details].map(([detail, c]) => [`  ×${c}`, detail.slice(0, 100)]),
  ];
  return {
    name: 'rolling',
    text: [`rolling restart (${INSTANCES} instances, ${n} agents, ${opts.rollingRate} req/s; one run):`, table(rows, ['rolling restart', 'value']), table(checkRows(result), CHECK_HEADER)],
    checks: result,
    data: { agents: n, instances: INSTANCES, rate: opts.rollingRate, answers, non200, argon2_checks: checks, argon2_per_agent: perAgent, statuses: Object.fromEntries(statuses), restart_s: restartSeconds },
  };
}
