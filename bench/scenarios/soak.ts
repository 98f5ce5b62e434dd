// `npm run soak` (the scenario `soak`, only when named): a bounded soak. Mixed traffic over every public endpoint for a fixed time while signing
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
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from 'jose';
import type { Scenario } from './types.js';
import type { BenchContext, ScenarioReport } from '../lib/context.js';
import type { SoakOptions } from '../lib/args.js';
import { startBenchService, type BenchService } from '../lib/service.js';
import { freePort } from '../../kit/ports.js';
import { sleep } from '../../kit/wait.js';
import { Admin, credentialsBody, tokenBody, type Agent } from '../lib/seed.js';
import { load, type RequestSpec } from '../lib/load.js';
import { freshRequest } from '../lib/http.js';
import { check } from '../lib/checks.js';
import { table } from '../lib/report.js';
import { JSON_HEADERS } from '../lib/workload.js';

const exec = promisify(execFile);

export const soak: Scenario = {
  name: 'soak',
  title: 'mixed traffic while keys and secrets rotate and Redis restarts (npm run soak); expects zero failures',
  byDefault: false,
  run: (ctx) => ctx.scoped((defer) => runSoak(ctx, defer)),
};

/** What one soak saw: failures by kind (it passes when this stays empty), every answer by endpoint and status. */
class Tally {
  readonly failures = new Map<string, number>();
  readonly answers = new Map<string, number>();
  readonly events = { keyRotations: 0, secretRotations: 0, redisRestarts: 0, tokensVerified: 0, oldSecretsRefused: 0, readyzNot200: 0 };

  fail(kind: string): void {
    this.failures.set(kind, (this.failures.get(kind) ?? 0) + 1);
  }
}

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

async function runSoak(ctx: BenchContext, defer: (fn: () => Promise<void> | void) => void): Promise<ScenarioReport> {
  const opts = ctx.opts.soak;
  const ownRedis = opts.redisPort === undefined;
  const redisPort = opts.redisPort ?? (await freePort());
  if (ownRedis) {
    await startRedis(redisPort);
    defer(() => stopRedis(redisPort));
  }
  ctx.log(`service on Postgres + Redis :${redisPort}${ownRedis ? ' (private instance)' : ''}; ${opts.seconds}s, ${opts.connections} connections, ${opts.rate} req/s`);
  const service = await startBenchService({ embedded: false, uvThreads: ctx.opts.uvThreads, redisUrl: `redis://127.0.0.1:${redisPort}` });
  defer(() => service.dispose());
  return soakTraffic(ctx, opts, service, redisPort);
}

async function soakTraffic(ctx: BenchContext, opts: SoakOptions, service: BenchService, redisPort: number): Promise<ScenarioReport> {
  const tally = new Tally();
  const fail = (kind: string) => tally.fail(kind);
  const { answers, events } = tally;
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

  const deadline = Date.now() + opts.seconds * 1000;
  let running = true;
  // Disruptions stop 2 s before the traffic does; the checks go on until the end.
  const every = (seconds: number, task: () => Promise<void>, disruptive = true) =>
    (async () => {
      while (running) {
        await sleep(seconds * 1000);
        if (!running || (disruptive && Date.now() > deadline - 2000)) break;
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
    every(opts.keyEverySeconds, async () => {
      if (await adminCall('key rotate', 'POST', '/admin/v1/keys/rotate')) events.keyRotations++;
    }),
    every(opts.secretEverySeconds, async () => {
      const i = secretIndex++ % current.length;
      const old = current[i];
      const rotated = await adminCall('secret rotate', 'POST', `/admin/v1/agents/${old.agent_id}/secret/rotate`, { grace_seconds: opts.graceSeconds });
      if (!rotated) return;
      current[i] = { ...old, api_key_id: rotated.api_key_id, secret: rotated.secret };
      pendingOldSecrets.push({ agent: old, checkAt: Date.now() + (opts.graceSeconds + 1.5) * 1000 });
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
    every(opts.redisEverySeconds, async () => {
      ctx.log(`redis: shutdown nosave, ${opts.redisDownSeconds}s down, start`);
      await stopRedis(redisPort);
      await sleep(opts.redisDownSeconds * 1000);
      await startRedis(redisPort);
      events.redisRestarts++;
    }),
  ];

  ctx.log(
    `traffic for ${opts.seconds}s: token, listing, JWKS, scope file, openapi.json; key rotation every ${opts.keyEverySeconds}s, ` +
      `secret rotation every ${opts.secretEverySeconds}s (grace ${opts.graceSeconds}s), Redis restart every ${opts.redisEverySeconds}s`,
  );
  const result = await load({
    url: service.publicUrl,
    connections: opts.connections,
    duration: opts.seconds,
    overallRate: opts.rate,
    requests,
    onError: (error) => fail(`transport: ${error.message}`),
  });
  // Let the checks of the last rotated secrets run, then stop the schedulers.
  while (pendingOldSecrets.length > 0 || sampled.length > 0) await sleep(500);
  running = false;
  await Promise.all(tasks);

  const { failures } = tally;
  const totalFailures = [...failures.values()].reduce((a, b) => a + b, 0);
  const text = [
    `Soak: ${result.requests} requests in ${result.seconds}s (${result.rps.toFixed(0)} req/s), p99 ${result.p99} ms\nevents: ${JSON.stringify(events)}`,
    table([...answers.entries()].sort().map(([k, n]) => [k, String(n)]), ['endpoint status', 'answers']),
    failures.size === 0 ? 'failures: none' : table([...failures.entries()].sort((a, b) => b[1] - a[1]).map(([k, n]) => [k, String(n)]), ['failure kind', 'count']),
    `${totalFailures === 0 ? 'PASS' : 'FAIL'}: ${totalFailures} failure(s) (expected 0)`,
  ];
  return {
    name: 'soak',
    text,
    checks: [check('soak failures', [totalFailures], { op: '=', value: 0 })],
    data: { requests: result.requests, rps: result.rps, p99: result.p99, events, answers: Object.fromEntries(answers), failures: Object.fromEntries(failures), total_failures: totalFailures },
    failed: totalFailures > 0,
  };
}
