// `npm run bench`: one run measures the service and, beside it, the limits of this machine and a peer.
//   1. limits: openssl RSA-2048 sign/s and argon2id verify/s on all cores (nothing else running);
//   2. the service on real Postgres + Redis (or --embedded), seeded through the admin API:
//      scale check (token-warm with 10 / 1,000 rows), token warm, token cold, platform listing, JWKS,
//      scope file, then the scale check at 100,000 rows; peak RSS of the service's processes throughout;
//   3. a bare uWS server serving the same JWKS bytes, and node-oidc-provider (client_credentials, RS256
//      JWT bound to a resource) as the peer; same connections and duration;
//   4. ratios against targets, a table on stdout and bench/results/latest.json.
// autocannon runs inside this process (no worker threads), so on a small machine the load generator takes a
// share of the same cores as the server; every figure, the peer's and bare uWS's included, pays that cost.
import { mkdirSync, writeFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { hashSync } from '@node-rs/argon2';
import { parseOptions, type BenchOptions } from './lib/args.js';
import { startBenchService, freePort, type BenchService } from './lib/service.js';
import { Admin, credentialsBody, tokenBody, type Agent } from './lib/seed.js';
import { measure, type RequestSpec } from './lib/load.js';
import { RssSampler, childPids } from './lib/rss.js';
import { decodeJwt, freshRequest, prewarm } from './lib/http.js';
import { BulkAgents } from './lib/bulk.js';
import { argon2Tasks } from './lib/metrics.js';
import { spawnReady } from './lib/children.js';
import { opensslRsa2048 } from './limits/openssl.js';
import { argon2VerifyRate } from './limits/argon2-rate.js';
import { auditComparison, type AuditComparison } from './lib/audit.js';
import {
  machineInfo, table, measurementRows, MEASUREMENT_HEADER, ratio, ratioRows, mib, fmt,
  type Measurement, type Ratio,
} from './lib/report.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(here, '../..');
const JSON_HEADERS = { 'content-type': 'application/json' };
const TOKEN_PATH = '/api/v1/auth/token';
const LISTING_PATH = '/api/v1/auth/agents/me/platforms';
const JWKS_PATH = '/.well-known/jwks.json';

const log = (message: string) => process.stderr.write(`[bench ${elapsed()}] ${message}\n`);
const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s`;

const cleanups: (() => Promise<void>)[] = [];
async function cleanup(): Promise<void> {
  while (cleanups.length > 0) await cleanups.pop()!().catch((e) => log(`cleanup: ${e}`));
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: cleaning up`);
    void cleanup().finally(() => process.exit(130));
  });
}

interface ScalePoint {
  target_rows: number;
  rows: number | null;
  rps: number;
  p99: number;
  non2xx: number;
  errors: number;
  rss_peak_mib: number;
}

async function main(): Promise<void> {
  const opts = parseOptions();
  if (!existsSync(path.join(ROOT, 'dist/src/main.js'))) throw new Error('dist/src/main.js is missing: run `npm run build` first');
  const machine = machineInfo();
  log(`${machine.cores} cores, ${machine.cpu_model}, node ${machine.node}; ${opts.connections} connections, ${opts.duration}s per measurement after ${opts.warmup}s warm-up`);
  if (machine.loadavg_at_start > 0.5) log(`warning: load average ${machine.loadavg_at_start} before the run: other processes use the CPU, figures will be low`);

  if (opts.auditOnly) return auditOnly(opts, machine);

  // 1. Limits of the machine, measured while nothing else runs.
  log(`openssl speed -multi ${opts.cores} -seconds ${opts.opensslSeconds} rsa2048 ...`);
  const openssl = await opensslRsa2048(opts.cores, opts.opensslSeconds);
  log(`  RSA-2048 sign/s ${fmt(openssl.signPerSecond)}`);
  log(`argon2id verify rate, ${opts.cores} threads, ${opts.argon2Seconds}s ...`);
  const argon2 = await argon2VerifyRate(opts.cores, opts.argon2Seconds);
  log(`  argon2id verify/s ${fmt(argon2.verifyPerSecond, 1)} (${JSON.stringify(argon2.options)} from ${argon2.optionsSource})`);

  // 2. The service.
  log(`starting the service (${opts.embedded ? 'embedded PGlite + in-process cache' : 'Postgres + Redis, default WORKERS'}) ...`);
  const service = await startBenchService({ embedded: opts.embedded });
  cleanups.push(() => service.dispose());
  const rss = new RssSampler(service.pid).start();
  cleanups.push(async () => rss.stop());
  // The service's default: a cluster of `cores` HTTP processes with Redis, one process embedded.
  const expectedHttp = opts.embedded ? 1 : opts.cores;
  await waitForWorkers(service, expectedHttp);
  const children = childPids(service.pid);
  const httpProcesses = Math.max(1, children.length);
  log(`  up: pid ${service.pid}, ${children.length} child process(es); ${service.publicUrl}`);

  const admin = new Admin(service);
  const platform = await admin.createPlatform();
  const platformId = platform.platform_id;
  const seedConcurrency = opts.cores * 4;
  const tokenUrl = `${service.publicUrl}${TOKEN_PATH}`;
  // Enough fresh connections per agent that each HTTP process very likely verified it (miss ~ n·2^-tries).
  const prewarmTimes = 4 * httpProcesses + 2;

  let bulk: BulkAgents | undefined;
  if (service.databaseUrl) {
    bulk = new BulkAgents(service.databaseUrl, hashSync(randomBytes(32).toString('base64url'), argon2.options));
    cleanups.push(() => bulk!.end());
  }

  const scaleSeed = await admin.createAgents(opts.scaleAgents, platformId, 'scale', seedConcurrency);
  const scaleAgents = scaleSeed.agents;
  await sanityCheckToken(tokenUrl, scaleAgents[0], platformId);
  let seededAgents = scaleAgents.length;

  const scale: ScalePoint[] = [];
  const scaleNotes: string[] = [];
  const scalePoint = async (target: number, last = false) => {
    let rows: number | null = seededAgents;
    if (bulk) {
      const before = await bulk.count();
      if (before < target) {
        const t0 = Date.now();
        await bulk.add(target - before);
        log(`  inserted ${fmt(target - before)} bulk agent rows in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
      }
      rows = await bulk.count();
    } else if (target > seededAgents) {
      // The embedded store lives inside the service: no bulk SQL. The last point measures what was seeded.
      scaleNotes.push(`${target} rows: ${last ? `measured at ${seededAgents} seeded rows instead` : 'skipped'} (embedded store: bulk rows need direct SQL)`);
      if (!last) return;
    }
    const bodies = scaleAgents.map((a) => tokenBody(a, platformId));
    await prewarm(tokenUrl, bodies, prewarmTimes);
    rss.mark();
    const result = await measure({
      url: service.publicUrl,
      connections: opts.connections,
      duration: opts.scaleDuration,
      // The first load on a fresh service also warms V8's JIT and the connection pools: give it longer.
      warmup: scale.length === 0 ? opts.warmup + 3 : opts.warmup,
      requests: bodies.map((body) => ({ method: 'POST', path: TOKEN_PATH, headers: JSON_HEADERS, body })),
    });
    rss.sample();
    const point: ScalePoint = {
      target_rows: target,
      rows,
      rps: result.rps,
      p99: result.p99,
      non2xx: result.non2xx,
      errors: result.errors,
      rss_peak_mib: mib(rss.windowPeak),
    };
    scale.push(point);
    log(`  scale ${fmt(rows)} rows: ${fmt(result.rps)} req/s, p99 ${fmt(result.p99, 1)} ms, non-2xx ${result.non2xx}, RSS ${fmt(point.rss_peak_mib)} MiB`);
  };

  const sizes = opts.scale ? opts.scaleSizes : [];
  const lastSize = sizes.length > 1 ? sizes[sizes.length - 1] : undefined;
  for (const size of sizes.slice(0, lastSize === undefined ? sizes.length : -1)) {
    log(`scale check at ${fmt(size)} rows ...`);
    await scalePoint(size);
  }

  // Seed the warm and cold pools. The cold pool must outlast warm-up + measurement at the argon2 rate.
  // Sized from the measured argon2 rate, but never below 100/s: a machine busy during the limit measurement
  // would otherwise leave the cold run without fresh agents.
  const coldRate = Math.max(argon2.verifyPerSecond, 100);
  const coldNeeded = Math.min(opts.maxColdAgents, Math.ceil(coldRate * (opts.duration + opts.warmup) * 1.5) + 2 * opts.connections);
  log(`seeding ${opts.warmAgents} warm + ${coldNeeded} cold agents through the admin API (${seedConcurrency} in flight) ...`);
  const seedStart = Date.now();
  const pools = await admin.createAgents(opts.warmAgents + coldNeeded, platformId, 'pool', seedConcurrency);
  const seedSeconds = (Date.now() - seedStart) / 1000;
  seededAgents += pools.agents.length;
  const warmAgents = pools.agents.slice(0, opts.warmAgents);
  const coldAgents = pools.agents.slice(opts.warmAgents);
  log(`  seeded ${pools.agents.length} agents in ${seedSeconds.toFixed(1)}s (${fmt(pools.perSecond, 1)} agents/s incl. grant)`);
  // Seeding wrote thousands of rows: let Postgres settle first, so the first measurement does not pay
  // for autovacuum and checkpoint work that the later ones do not.
  if (bulk) await bulk.settle();
  await new Promise((r) => setTimeout(r, 2000));

  const measurements: Measurement[] = [];
  let argonBefore: number | null = null;
  const run = async (name: string, requests: RequestSpec[], extra: Partial<Measurement> = {}, onStart?: (stop: () => void) => void, onMeasure?: () => void) => {
    rss.mark();
    const result = await measure({
      url: service.publicUrl,
      connections: opts.connections,
      duration: opts.duration,
      warmup: opts.warmup,
      requests,
      onStart,
      // Between warm-up and measurement: count the argon2 tasks the measured part runs.
      beforeMeasure: async () => {
        argonBefore = await argon2Tasks(service.adminUrl);
        onMeasure?.();
      },
    });
    const argonAfter = await argon2Tasks(service.adminUrl);
    rss.sample();
    const argon2Verifications = argonBefore !== null && argonAfter !== null ? argonAfter - argonBefore : undefined;
    const m: Measurement = { name, ...result, argon2Verifications, ...extra };
    measurements.push(m);
    log(`  ${name}: ${fmt(m.rps)} req/s, p50 ${fmt(m.p50, 1)} ms, p99 ${fmt(m.p99, 1)} ms, non-2xx ${m.non2xx}, errors ${m.errors}; ` +
      `argon2 tasks ${m.argon2Verifications ?? '?'}; RSS ${fmt(mib(rss.windowPeak))} MiB`);
    return m;
  };

  log('token, warm credentials ...');
  const warmBodies = warmAgents.map((a) => tokenBody(a, platformId));
  const prewarmCounts = await prewarm(tokenUrl, warmBodies, prewarmTimes);
  if (Object.keys(prewarmCounts).some((s) => s !== '200')) log(`  pre-warm statuses: ${JSON.stringify(prewarmCounts)}`);
  const tokenWarm = await run('token (warm)', warmBodies.map((body) => ({ method: 'POST', path: TOKEN_PATH, headers: JSON_HEADERS, body })));

  log('token, cold credentials (every request is an agent\'s first) ...');
  const coldBodies = coldAgents.map((a) => tokenBody(a, platformId));
  let nextCold = 0;
  let coldAtMeasure = 0;
  let exhausted = false;
  let stopCurrent: (() => void) | undefined;
  const tokenCold = await run(
    'token (cold)',
    [
      {
        method: 'POST',
        path: TOKEN_PATH,
        headers: JSON_HEADERS,
        setupRequest: (req) => {
          if (nextCold >= coldBodies.length) {
            // Out of never-used agents: end the run now rather than measure warm requests.
            exhausted = true;
            stopCurrent?.();
            return { ...req, body: coldBodies[coldBodies.length - 1] };
          }
          return { ...req, body: coldBodies[nextCold++] };
        },
      },
    ],
    {},
    (stop) => (stopCurrent = stop),
    () => (coldAtMeasure = nextCold),
  );
  // If the pool ran out, the last requests reused one agent (warm): the figure would be wrong, so drop it.
  tokenCold.note = `${nextCold - coldAtMeasure} fresh agents in the measured part` +
    (exhausted ? `; POOL RAN OUT: figure not valid, raise --max-cold-agents (${opts.maxColdAgents})` : '');
  const tokenColdValid = !exhausted;

  log('platform listing ...');
  const listingBodies = warmAgents.map(credentialsBody);
  await prewarm(`${service.publicUrl}${LISTING_PATH}`, listingBodies, 2);
  await run('platform listing', listingBodies.map((body) => ({ method: 'POST', path: LISTING_PATH, headers: JSON_HEADERS, body })));

  log('JWKS ...');
  const jwksReply = await freshRequest(`${service.publicUrl}${JWKS_PATH}`, 'GET');
  if (jwksReply.status !== 200) throw new Error(`GET ${JWKS_PATH}: ${jwksReply.status}`);
  const jwks = await run('JWKS', [{ method: 'GET', path: JWKS_PATH }]);

  log('scope file ...');
  const scopesPath = `/api/v1/platforms/${platformId}/scopes.yaml`;
  const scopesReply = await freshRequest(`${service.publicUrl}${scopesPath}`, 'GET');
  if (scopesReply.status !== 200) throw new Error(`GET ${scopesPath}: ${scopesReply.status} ${scopesReply.body.slice(0, 200)}`);
  await run('scope file', [{ method: 'GET', path: scopesPath }]);

  if (lastSize !== undefined) {
    log(`scale check at ${fmt(lastSize)} rows ...`);
    await scalePoint(lastSize, true);
  }
  const agentsSchema = bulk ? await bulk.describe().catch(() => undefined) : undefined;

  rss.stop();
  const peakRss = rss.peak;
  const peakHwm = rss.hwm;
  const processCount = rss.processCount();
  log(`service peak RSS ${fmt(mib(peakRss))} MiB over ${processCount} process(es) (sum of VmHWM ${fmt(mib(peakHwm))} MiB); stopping it`);
  await cleanup();

  // The audit trail's cost: warm tokens with AUDIT=off and on, on fresh services (same seed, alternating).
  let audit: AuditComparison | undefined;
  if (opts.auditRounds > 0) {
    log(`audit trail off/on, warm tokens, ${opts.auditRounds} round(s) ...`);
    audit = await auditComparison(opts, log, opts.auditRounds);
    measurements.push(...audit.off, ...audit.on);
  }

  // 3. Beside it: bare uWS with the same JWKS bytes, and the peer. The service is stopped by now.
  const sideProcesses = opts.peerWorkers || httpProcesses;
  log(`bare uWS JWKS server, ${sideProcesses} process(es) ...`);
  const bare = await bareUws(jwksReply.body, sideProcesses, opts);
  measurements.push(bare);
  log(`  bare uWS JWKS: ${fmt(bare.rps)} req/s, p99 ${fmt(bare.p99, 1)} ms`);

  log(`bare uWS signer (crypto.sign on the HTTP thread), ${machine.cores} process(es) ...`);
  const bareSigner = await bareSignerRun(machine.cores, opts);
  measurements.push(bareSigner);
  log(`  bare uWS signer: ${fmt(bareSigner.rps)} req/s, p99 ${fmt(bareSigner.p99, 1)} ms`);

  let peer: Measurement | undefined;
  if (opts.peer) {
    log(`peer: node-oidc-provider client_credentials (RS256 JWT), ${sideProcesses} process(es) ...`);
    peer = await oidcPeer(sideProcesses, opts);
    measurements.push(peer);
    log(`  peer: ${fmt(peer.rps)} req/s, p99 ${fmt(peer.p99, 1)} ms, non-2xx ${peer.non2xx}`);
  }

  // 4. Ratios and targets.
  const ratios: Ratio[] = [
    ratio('token warm / openssl sign', tokenWarm.rps / openssl.signPerSecond, '>= 0.85', (v) => v >= 0.85),
    ratio('token warm / bare uWS signer (info)', tokenWarm.rps / bareSigner.rps, '-', () => true),
    ratio('token warm / peer', peer ? tokenWarm.rps / peer.rps : null, '>= 1.5', (v) => v >= 1.5),
    ratio(`token warm p99 ms @${opts.connections}`, tokenWarm.p99, '<= 40', (v) => v <= 40),
    ratio('token warm non-2xx + errors', tokenWarm.non2xx + tokenWarm.errors, '= 0', (v) => v === 0),
    ratio('token warm audit on / off', audit ? audit.ratio : null, '>= 0.9', (v) => v >= 0.9),
    ratio(`token warm audit on p99 ms @${opts.connections}`, audit ? audit.onP99 : null, '<= 40', (v) => v <= 40),
    ratio('audit bytes per event on disk (info)', audit?.bytesPerEvent ?? null, '-', () => true),
    ratio('CPU per warm token, audit off / on (info)', audit ? audit.cpuMsPerTokenOff / audit.cpuMsPerTokenOn : null, '-', () => true),
    ratio('token cold / argon2 verify', tokenColdValid ? tokenCold.rps / argon2.verifyPerSecond : null, '>= 0.9', (v) => v >= 0.9),
    ratio('JWKS / bare uWS', jwks.rps / bare.rps, '>= 0.9', (v) => v >= 0.9),
    ratio('peak RSS MiB (sum of processes)', mib(peakRss), '<= 256', (v) => v <= 256),
    ratio('errors in all service runs', measurements.filter((m) => !m.name.startsWith('bare') && !m.name.startsWith('peer')).reduce((s, m) => s + m.non2xx + m.errors, 0), '= 0', (v) => v === 0),
  ];

  const totalSeconds = (Date.now() - started) / 1000;
  const out = [
    '',
    `Agent Credential Exchange benchmark: ${machine.cores} cores (${machine.cpu_model}), node ${machine.node}, ${machine.date}`,
    `service: ${opts.embedded ? 'embedded (PGlite, in-process cache)' : 'Postgres + Redis'}, ${processCount} process(es) (${httpProcesses} HTTP); ` +
      `load: autocannon in the bench process, ${opts.connections} connections, ${opts.duration}s after ${opts.warmup}s warm-up`,
    '',
    table(measurementRows(measurements), MEASUREMENT_HEADER),
    '',
    table(
      [
        ['openssl RSA-2048 sign/s (all cores)', fmt(openssl.signPerSecond)],
        ['argon2id verify/s (all cores)', fmt(argon2.verifyPerSecond, 1)],
        ['bare uWS JWKS req/s', fmt(bare.rps)],
        ['bare uWS signer (crypto.sign, one process per core) req/s', fmt(bareSigner.rps)],
        ['peer (oidc-provider) token req/s', peer ? fmt(peer.rps) : '-'],
        ['service peak RSS MiB (sampled sum / sum of VmHWM)', `${fmt(mib(peakRss))} / ${fmt(mib(peakHwm))}`],
        ['agents seeded via admin API / seeding agents/s', `${seededAgents} / ${fmt(pools.perSecond, 1)}`],
      ],
      ['limit', 'value'],
    ),
    '',
    scale.length > 0
      ? table(
          scale.map((s) => [fmt(s.rows), fmt(s.rps), fmt(s.p99, 1), String(s.non2xx + s.errors), fmt(s.rss_peak_mib)]),
          ['agents rows', 'token warm req/s', 'p99 ms', 'non-2xx+err', 'RSS MiB'],
        )
      : 'scale check skipped',
    ...scaleNotes,
    '',
    table(ratioRows(ratios), ['ratio / check', 'value', 'target', '']),
    '',
    `total ${totalSeconds.toFixed(0)}s; load average ${machine.loadavg_at_start} at start, ${os.loadavg()[0].toFixed(2)} at end.`,
    'Note: autocannon runs in the bench process and shares the machine\'s cores with the server under test.',
  ].join('\n');
  console.log(out);

  const result = {
    machine: { ...machine, openssl: openssl.version },
    settings: {
      mode: opts.embedded ? 'embedded' : 'postgres+redis',
      connections: opts.connections,
      duration_s: opts.duration,
      warmup_s: opts.warmup,
      scale_duration_s: opts.scaleDuration,
      service_processes: processCount,
      service_http_processes: httpProcesses,
      side_processes: sideProcesses,
      load_generator: 'autocannon 9, programmatic, in the bench process (no worker threads): shares the cores with the server',
    },
    limits: {
      openssl_rsa2048_sign_per_s: openssl.signPerSecond,
      openssl_rsa2048_verify_per_s: openssl.verifyPerSecond,
      argon2_verify_per_s: argon2.verifyPerSecond,
      argon2_threads: argon2.threads,
      argon2_options: argon2.options,
      argon2_options_source: argon2.optionsSource,
    },
    seeding: { agents: seededAgents, pool_seconds: seedSeconds, agents_per_s: pools.perSecond, warm_agents: warmAgents.length, cold_agents: coldAgents.length },
    measurements: Object.fromEntries(measurements.map((m) => [m.name, m])),
    peak_rss: { sampled_sum_mib: mib(peakRss), vmhwm_sum_mib: mib(peakHwm), processes: processCount },
    scale,
    scale_notes: scaleNotes,
    agents_schema: agentsSchema,
    ratios,
    audit: audit && auditSummary(audit),
    total_seconds: totalSeconds,
  };
  const file = opts.out ? path.resolve(opts.out) : path.join(ROOT, 'bench/results/latest.json');
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(result, null, 2) + '\n');
  log(`wrote ${path.relative(process.cwd(), file) || file}`);
}

function auditSummary(audit: AuditComparison) {
  const perDay = 100e6;
  return {
    ratio_on_off: audit.ratio,
    on_p99_ms: audit.onP99,
    bytes_per_event: audit.bytesPerEvent,
    events_weighed: audit.events,
    table_bytes: audit.tableBytes,
    cpu_ms_per_token_off: audit.cpuMsPerTokenOff,
    cpu_ms_per_token_on: audit.cpuMsPerTokenOn,
    // On a CPU-bound machine throughput is inverse to CPU per token: the load-independent estimate.
    throughput_ratio_from_cpu: audit.cpuMsPerTokenOff / audit.cpuMsPerTokenOn,
    // What a day of 100 million events occupies, and the whole trail at the default retention (90 days).
    gib_per_100m_events_day: audit.bytesPerEvent ? (audit.bytesPerEvent * perDay) / 2 ** 30 : null,
    tib_at_90_days: audit.bytesPerEvent ? (audit.bytesPerEvent * perDay * 90) / 2 ** 40 : null,
  };
}

/** `npm run bench -- --audit-only`: the audit off/on comparison alone. */
async function auditOnly(opts: BenchOptions, machine: ReturnType<typeof machineInfo>): Promise<void> {
  log(`audit trail off/on, warm tokens, ${opts.auditRounds || 1} round(s), ${opts.connections} connections, ${opts.duration}s each ...`);
  const audit = await auditComparison(opts, log, opts.auditRounds || 1);
  const summary = auditSummary(audit);
  const ratios = [
    ratio('token warm audit on / off', audit.ratio, '>= 0.9', (v) => v >= 0.9),
    ratio(`token warm audit on p99 ms @${opts.connections}`, audit.onP99, '<= 40', (v) => v <= 40),
    ratio('audit bytes per event on disk (info)', audit.bytesPerEvent, '-', () => true),
    ratio('CPU per warm token, audit off / on (info)', summary.throughput_ratio_from_cpu, '-', () => true),
    ratio('GiB per day at 100 million events (info)', summary.gib_per_100m_events_day, '-', () => true),
  ];
  console.log(
    [
      '',
      `Audit trail cost: ${machine.cores} cores (${machine.cpu_model}), node ${machine.node}, ${machine.date}; ` +
        `${opts.embedded ? 'embedded' : 'Postgres + Redis'}, ${opts.connections} connections, ${opts.duration}s after warm-up`,
      '',
      table(measurementRows([...audit.off, ...audit.on]), MEASUREMENT_HEADER),
      '',
      table(ratioRows(ratios), ['ratio / check', 'value', 'target', '']),
    ].join('\n'),
  );
  const file = opts.out ? path.resolve(opts.out) : path.join(ROOT, 'bench/results/audit-latest.json');
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify({ machine, settings: { connections: opts.connections, duration_s: opts.duration, mode: opts.embedded ? 'embedded' : 'postgres+redis' }, measurements: [...audit.off, ...audit.on], audit: summary, ratios }, null, 2) + '\n');
  log(`wrote ${path.relative(process.cwd(), file) || file}`);
}

/**
 * readyz turns 200 as soon as one cluster worker is up (they share the port), so also wait for every
 * worker's "ready" log line (the service logs at info; nothing per request since ACCESS_LOG=false) and
 * for the public port.
 */
async function waitForWorkers(service: BenchService, expected: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  const readyLines = () => service.output().split('\n').filter((l) => l.includes('agent credential exchange ready')).length;
  while (Date.now() < deadline && readyLines() < expected) await new Promise((r) => setTimeout(r, 100));
  if (readyLines() < expected) log(`warning: ${readyLines()} of ${expected} HTTP processes reported ready after 60 s`);
  const reply = await freshRequest(`${service.publicUrl}${JWKS_PATH}`, 'GET');
  if (reply.status !== 200) throw new Error(`GET ${JWKS_PATH}: ${reply.status} ${reply.body.slice(0, 200)}`);
}

/** One real token before any load: a wrong setup should fail loudly, not produce a table of 4xx. */
async function sanityCheckToken(url: string, agent: Agent, platformId: string): Promise<void> {
  const reply = await freshRequest(url, 'POST', tokenBody(agent, platformId), JSON_HEADERS);
  if (reply.status !== 200) throw new Error(`token sanity check: ${reply.status} ${reply.body.slice(0, 300)}`);
  const { header, payload } = decodeJwt(JSON.parse(reply.body).access_token);
  if (header.alg !== 'RS256' || payload.aud !== platformId) throw new Error(`token sanity check: unexpected JWT ${JSON.stringify({ header, payload })}`);
}

async function bareUws(jwksBytes: string, processes: number, opts: BenchOptions): Promise<Measurement> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ace-bench-jwks-'));
  const file = path.join(dir, 'jwks.json');
  writeFileSync(file, jwksBytes);
  const port = await freePort();
  const servers = [];
  try {
    for (let i = 0; i < processes; i++) {
      servers.push(await spawnReady(new URL('./limits/bare-uws.js', import.meta.url), { PORT: String(port), JWKS_FILE: file }));
    }
    const check = await freshRequest(`http://127.0.0.1:${port}${JWKS_PATH}`, 'GET');
    if (check.body !== jwksBytes) throw new Error('bare uWS does not serve the same JWKS bytes');
    const result = await measure({
      url: `http://127.0.0.1:${port}`,
      connections: opts.connections,
      duration: opts.duration,
      warmup: opts.warmup,
      requests: [{ method: 'GET', path: JWKS_PATH }],
    });
    return { name: 'bare uWS JWKS', ...result, note: `${processes} process(es), same bytes` };
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A bare uWS handler signing with crypto.sign: what an RS256 endpoint with no other work reaches here. */
async function bareSignerRun(processes: number, opts: BenchOptions): Promise<Measurement> {
  const port = await freePort();
  const servers = [];
  try {
    for (let i = 0; i < processes; i++) servers.push(await spawnReady(new URL('./limits/bare-signer.js', import.meta.url), { PORT: String(port) }));
    const result = await measure({
      url: `http://127.0.0.1:${port}`,
      connections: opts.connections,
      duration: opts.duration,
      warmup: opts.warmup,
      requests: [{ method: 'POST', path: '/token', headers: JSON_HEADERS, body: '{"api_key_id":"x","secret":"y","platform_id":"z"}' }],
    });
    return { name: 'bare uWS signer', ...result, note: `${processes} process(es), crypto.sign, no other work` };
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
  }
}

async function oidcPeer(processes: number, opts: BenchOptions): Promise<Measurement> {
  const port = await freePort();
  const peer = await spawnReady(new URL('./peer/oidc-peer.js', import.meta.url), { PORT: String(port), PEER_WORKERS: String(processes) });
  try {
    const [, , clientId, clientSecret, resource] = peer.readyLine.trim().split(' ');
    const body = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
      resource,
      scope: 'orders:read orders:write',
    }).toString();
    const headers = { 'content-type': 'application/x-www-form-urlencoded' };
    const check = await freshRequest(`http://127.0.0.1:${port}/token`, 'POST', body, headers);
    if (check.status !== 200) throw new Error(`peer token: ${check.status} ${check.body.slice(0, 300)}`);
    const { header, payload } = decodeJwt(JSON.parse(check.body).access_token);
    if (header.alg !== 'RS256' || payload.aud !== resource) throw new Error(`peer token: unexpected JWT ${JSON.stringify({ header, payload })}`);
    const result = await measure({
      url: `http://127.0.0.1:${port}`,
      connections: opts.connections,
      duration: opts.duration,
      warmup: opts.warmup,
      requests: [{ method: 'POST', path: '/token', headers, body }],
    });
    return { name: 'peer: oidc-provider token', ...result, note: `${processes} process(es), client_secret_post, RS256 JWT` };
  } finally {
    await peer.stop();
  }
}

main()
  .then(() => cleanup())
  .catch(async (error) => {
    log(`failed: ${error instanceof Error ? error.stack ?? error.message : error}`);
    await cleanup();
    process.exitCode = 1;
  });
