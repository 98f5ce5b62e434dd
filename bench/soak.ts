// `npm run soak`: a bounded soak. Mixed traffic over every public endpoint for a fixed time while signing
// keys rotate, agent secrets rotate (with a grace period) and Redis is shut down and started again, then a
// report of every failure by kind. Expected: zero.
//
// Checks beyond the HTTP status of each answer:
//  - a sample of issued tokens is verified against the JWKS fetched afterwards (a key must be published
//    before anything signs with it, and stay published while its tokens live);
//  - once a rotated secret's grace period is over (plus the one second changes take to spread), the old
//    secret must be refused with 401.
//
// Redis: by default the soak starts its own redis-server on a free port (same flags as a production-less
// restart: --save "" --appendonly no) so that restarting it does not disturb anything else using the
// shared 127.0.0.1:6379; `--redis-port 6379` restarts that one instead.
import os from 'node:os';
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from 'jose';
import { startBenchService, type BenchService } from './lib/service.js';
import { freePort } from '../kit/ports.js';
import { sleep } from '../kit/wait.js';
import { Admin, credentialsBody, tokenBody, type Agent } from './lib/seed.js';
import { load, type RequestSpec } from './lib/load.js';
import { freshRequest } from './lib/http.js';
import { table } from './lib/report.js';

const exec = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const JSON_HEADERS = { 'content-type': 'application/json' };
const started = Date.now();
const log = (message: string) => process.stderr.write(`[soak ${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${message}\n`);

const { values } = parseArgs({
  options: {
    duration: { type: 'string' },
    connections: { type: 'string' },
    rate: { type: 'string' },
    agents: { type: 'string' },
    'redis-port': { type: 'string' },
    'redis-every': { type: 'string' },
    'redis-down': { type: 'string' },
    'key-every': { type: 'string' },
    'secret-every': { type: 'string' },
    grace: { type: 'string' },
    quick: { type: 'boolean', default: false },
    out: { type: 'string' },
  },
});
const quick = values.quick === true;
const num = (v: string | undefined, d: number) => (v === undefined ? d : Number(v));
const opts = {
  duration: num(values.duration, quick ? 45 : 150),
  connections: num(values.connections, 16),
  rate: num(values.rate, 300),
  agents: num(values.agents, 20),
  redisPort: values['redis-port'] === undefined ? undefined : Number(values['redis-port']),
  redisEvery: num(values['redis-every'], quick ? 15 : 30),
  redisDown: num(values['redis-down'], 2),
  keyEvery: num(values['key-every'], quick ? 10 : 20),
  secretEvery: num(values['secret-every'], 3),
  grace: num(values.grace, 10),
};

/** Failures by kind; the soak passes when this stays empty. */
const failures = new Map<string, number>();
const fail = (kind: string) => failures.set(kind, (failures.get(kind) ?? 0) + 1);
/** Every answer by endpoint and status. */
const answers = new Map<string, number>();
let interrupted = false;
let stopLoad: (() => void) | undefined;
const events = { keyRotations: 0, secretRotations: 0, redisRestarts: 0, tokensVerified: 0, oldSecretsRefused: 0, readyzNot200: 0 };

async function redisCli(port: number, ...args: string[]) {
  return exec('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args]);
}
async function startRedis(port: number): Promise<void> {
  await exec('redis-server', ['--daemonize', 'yes', '--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no']);
  for (let i = 0; i < 50; i++) {
    try {
      if ((await redisCli(port, 'ping')).stdout.trim() === 'PONG') return;
    } catch {
      // starting
    }
    await sleep(100);
  }
  throw new Error(`redis-server on ${port} did not answer PING`);
}
async function stopRedis(port: number): Promise<void> {
  await redisCli(port, 'shutdown', 'nosave').catch(() => {}); // the connection drops as it exits
}

async function main(): Promise<void> {
  const ownRedis = opts.redisPort === undefined;
  const redisPort = opts.redisPort ?? (await freePort());
  if (ownRedis) await startRedis(redisPort);
  let service: BenchService | undefined;
  try {
    log(`service on Postgres + Redis :${redisPort}${ownRedis ? ' (private instance)' : ''}; ${opts.duration}s, ${opts.connections} connections, ${opts.rate} req/s`);
    service = await startBenchService({ embedded: false, uvThreads: Math.max(2, os.availableParallelism()), redisUrl: `redis://127.0.0.1:${redisPort}` });
    await soak(service, redisPort);
  } finally {
    await service?.dispose().catch((e) => log(`dispose: ${e}`));
    if (ownRedis) await stopRedis(redisPort);
  }
}

async function soak(service: BenchService, redisPort: number): Promise<void> {
  const admin = new Admin(service);
  const { platform_id: platformId } = await admin.createPlatform();
  const { agents } = await admin.createAgents(opts.agents, platformId, 'soak', 8);
  const current: Agent[] = agents.map((a) => ({ ...a }));

  // Traffic: every connection walks this list; token and listing pick the next agent with its current secret.
  let next = 0;
  const sampled: string[] = [];
  let tokenCount = 0;
  const counted = (endpoint: string, extra?: (status: number, body: string) => void) => (status: number, body: string) => {
    const key = `${endpoint} ${status}`;
    answers.set(key, (answers.get(key) ?? 0) + 1);
    if (status < 200 || status >= 300) fail(`http ${key}`);
    extra?.(status, String(body));
  };
  const token: RequestSpec = {
    method: 'POST',
    path: '/api/v1/auth/token',
    headers: JSON_HEADERS,
    setupRequest: (req) => ({ ...req, body: tokenBody(current[next++ % current.length], platformId) }),
    onResponse: counted('token', (status, body) => {
      if (status === 200 && tokenCount++ % 25 === 0 && sampled.length < 1000) sampled.push(JSON.parse(body).access_token);
    }),
  };
  const requests: RequestSpec[] = [
    token,
    {
      method: 'POST',
      path: '/api/v1/auth/agents/me/platforms',
      headers: JSON_HEADERS,
      setupRequest: (req) => ({ ...req, body: credentialsBody(current[next++ % current.length]) }),
      onResponse: counted('listing'),
    },
    { ...token },
    { method: 'GET', path: '/.well-known/jwks.json', onResponse: counted('jwks') },
    { ...token },
    { method: 'GET', path: `/api/v1/platforms/${platformId}/scopes.yaml`, onResponse: counted('scopes.yaml') },
    { method: 'GET', path: '/openapi.json', onResponse: counted('openapi.json') },
  ];

  const deadline = Date.now() + opts.duration * 1000;
  let running = true;
  // Disruptions stop 2 s before the traffic does; the checks go on until the end.
  const every = (seconds: number, task: () => Promise<void>, disruptive = true) =>
    (async () => {
      while (running && !interrupted) {
        await sleep(seconds * 1000);
        if (!running || interrupted || (disruptive && Date.now() > deadline - 2000)) break;
        await task().catch((e) => fail(`task error: ${e instanceof Error ? e.message : e}`));
      }
    })();

  const adminCall = async (what: string, method: string, url: string, body?: unknown) => {
    try {
      return await admin.call(method, url, body);
    } catch (error) {
      fail(`admin ${what}: ${String(error).slice(0, 120)}`);
      return undefined;
    }
  };

  const pendingOldSecrets: { agent: Agent; checkAt: number }[] = [];
  let secretIndex = 0;
  const tasks = [
    every(opts.keyEvery, async () => {
      if (await adminCall('key rotate', 'POST', '/admin/v1/keys/rotate')) events.keyRotations++;
    }),
    every(opts.secretEvery, async () => {
      const i = secretIndex++ % current.length;
      const old = current[i];
      const rotated = await adminCall('secret rotate', 'POST', `/admin/v1/agents/${old.agent_id}/secret/rotate`, { grace_seconds: opts.grace });
      if (!rotated) return;
      current[i] = { ...old, api_key_id: rotated.api_key_id, secret: rotated.secret };
      pendingOldSecrets.push({ agent: old, checkAt: Date.now() + (opts.grace + 1.5) * 1000 });
      events.secretRotations++;
    }),
    every(1, async () => {
      // Old secrets past their grace period must be refused everywhere: try each a few times on fresh connections.
      while (pendingOldSecrets.length > 0 && pendingOldSecrets[0].checkAt <= Date.now()) {
        const { agent } = pendingOldSecrets.shift()!;
        for (let k = 0; k < 4; k++) {
          const reply = await freshRequest(`${service.publicUrl}/api/v1/auth/token`, 'POST', tokenBody(agent, platformId), JSON_HEADERS);
          if (reply.status !== 401) fail(`old secret after grace answered ${reply.status} (expected 401)`);
        }
        events.oldSecretsRefused++;
      }
      // Sampled tokens must verify against the key set published now.
      if (sampled.length > 0) {
        const jwks = await freshRequest(`${service.publicUrl}/.well-known/jwks.json`, 'GET');
        const keySet = createLocalJWKSet(JSON.parse(jwks.body) as JSONWebKeySet);
        for (const jwt of sampled.splice(0)) {
          try {
            await jwtVerify(jwt, keySet, { audience: platformId, algorithms: ['RS256'] });
            events.tokensVerified++;
          } catch (error) {
            fail(`issued token does not verify against the JWKS: ${(error as { code?: string }).code ?? error}`);
          }
        }
      }
      const ready = await fetch(`${service.adminUrl}/readyz`).then((r) => r.status).catch(() => 0);
      if (ready !== 200) events.readyzNot200++;
    }, false),
    every(opts.redisEvery, async () => {
      log(`redis: shutdown nosave, ${opts.redisDown}s down, start`);
      await stopRedis(redisPort);
      await sleep(opts.redisDown * 1000);
      await startRedis(redisPort);
      events.redisRestarts++;
    }),
  ];

  log(`traffic for ${opts.duration}s: token, listing, JWKS, scope file, openapi.json; key rotation every ${opts.keyEvery}s, secret rotation every ${opts.secretEvery}s (grace ${opts.grace}s), Redis restart every ${opts.redisEvery}s`);
  const result = await load({
    url: service.publicUrl,
    connections: opts.connections,
    duration: opts.duration,
    overallRate: opts.rate,
    requests,
    onError: (error) => fail(`transport: ${error.message}`),
    onStart: (stop) => (stopLoad = stop),
  });
  // Let the checks of the last rotated secrets run, then stop the schedulers.
  while ((pendingOldSecrets.length > 0 || sampled.length > 0) && !interrupted) await sleep(500);
  running = false;
  await Promise.all(tasks);

  const totalFailures = [...failures.values()].reduce((a, b) => a + b, 0);
  const report = [
    '',
    `soak: ${result.requests} requests in ${result.seconds}s (${result.rps.toFixed(0)} req/s), p99 ${result.p99} ms`,
    `events: ${JSON.stringify(events)}`,
    '',
    table([...answers.entries()].sort().map(([k, n]) => [k, String(n)]), ['endpoint status', 'answers']),
    '',
    failures.size === 0
      ? 'failures: none'
      : table([...failures.entries()].sort((a, b) => b[1] - a[1]).map(([k, n]) => [k, String(n)]), ['failure kind', 'count']),
    '',
    `${totalFailures === 0 ? 'PASS' : 'FAIL'}: ${totalFailures} failure(s) (expected 0)`,
  ].join('\n');
  console.log(report);
  const file = values.out ? path.resolve(values.out) : path.join(ROOT, 'bench/results/soak-latest.json');
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(
    file,
    JSON.stringify(
      { date: new Date().toISOString(), options: opts, requests: result.requests, rps: result.rps, p99: result.p99, events, answers: Object.fromEntries(answers), failures: Object.fromEntries(failures), total_failures: totalFailures },
      null,
      2,
    ) + '\n',
  );
  if (totalFailures > 0) process.exitCode = 1;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    // main()'s finally blocks stop the service and the private Redis; give them a moment.
    interrupted = true;
    stopLoad?.();
    log(`${signal}: stopping`);
    setTimeout(() => process.exit(130), 20_000).unref();
  });
}

main().catch((error) => {
  log(`failed: ${error instanceof Error ? error.stack ?? error.message : error}`);
  process.exitCode = 1;
});
