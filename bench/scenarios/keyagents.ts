// Agents without secrets: first tokens of fresh private_key_jwt agents and of fresh federated workloads
// (a Kubernetes-shaped service-account token), beside warm secret tokens and the bare signer, in
// interleaved rounds on one service (Postgres + Redis, rate limits lifted like the compare scenario).
//
// Each round sends the same number of requests (--fleet-agents, default 5000) at the same connection
// count to every arm: warm secret tokens (agents already verified), then one request per fresh key agent
// (each with its own key pair, as real agents have; an ES256 assertion signed beforehand, so the client's
// signing is not measured; each agent is new to the service, so nothing is remembered) and one per fresh
// workload (all signed by the one issuer's key, as a cluster's are). The restart figure is the time the key
// agents' first tokens took against the time the same number of warm tokens took.
import { randomUUID, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { SignJWT } from 'jose';
import type { Scenario } from './types.js';
import type { BenchContext, ScenarioReport } from '../lib/context.js';
import { startBenchService } from '../lib/service.js';
import { Workload, TOKEN_PATH, JSON_HEADERS } from '../lib/workload.js';
import { pool, SCOPES } from '../lib/seed.js';
import { interleave, loadArm, summaryRows, SUMMARY_HEADER, type Arm } from '../lib/rounds.js';
import { startBareSigner } from '../lib/sides.js';
import { check, checkRows, CHECK_HEADER } from '../lib/checks.js';
import { pairedRatios } from '../lib/stats.js';
import { fmt, table, type Measurement } from '../lib/report.js';
import { load } from '../lib/load.js';
import { sleep } from '../../kit/wait.js';

export const keyagents: Scenario = {
  name: 'keyagents',
  title: 'agents without secrets: first tokens of fresh private_key_jwt and federated agents beside warm secret tokens and the bare signer',
  byDefault: true,
  run: (ctx) => ctx.scoped((defer) => runKeyAgents(ctx, defer)),
};

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
const K8S_ISSUER = 'https://kubernetes.default.svc.cluster.local';
/** The service's issuer: what the assertions and the workload tokens name as their audience. */
const ISSUER = 'https://ace.bench.example';

/** One request per body, at `connections`; the rate over the whole run (its seconds: how long the lot took). */
async function fixedCount(url: string, path: string, headers: Record<string, string>, bodies: string[], connections: number): Promise<Measurement> {
  let next = 0;
  const requests = [{ method: 'POST', path, headers, setupRequest: (req: Record<string, unknown>) => ({ ...req, body: bodies[next++ % bodies.length] }) }];
  const result = await load({ url, connections, duration: 600, amount: bodies.length, requests });
  return { name: path, ...result };
}

async function runKeyAgents(ctx: BenchContext, defer: (fn: () => Promise<void> | void) => void): Promise<ScenarioReport> {
  const { opts } = ctx;
  const n = opts.fleetAgents;
  const federated = Math.max(100, Math.floor(n / 5));
  ctx.log(`keyagents: starting the service (${opts.embedded ? 'embedded PGlite' : 'Postgres + Redis'}) ...`);
  const service = await startBenchService({
    embedded: opts.embedded,
    uvThreads: opts.uvThreads,
    env: { ISSUER, RATE_LIMIT_TOKEN_POINTS: '1000000', RATE_LIMIT_AUTH_FAIL_POINTS: '1000000' },
  });
  defer(() => service.dispose());
  const work = new Workload(ctx, service);
  await work.seed(opts.warmAgents);
  await work.prewarm(service.httpProcesses);

  const issuerKey = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const issuer = await work.admin.call('POST', '/admin/v1/workload-issuers', {
    issuer: K8S_ISSUER,
    audience: ISSUER,
    jwks: { keys: [{ ...issuerKey.publicKey.export({ format: 'jwk' }), kid: 'sa', alg: 'ES256' }] },
  });

  const seedStarted = performance.now();
  // A store deadline under load (503) is retried: the grant is idempotent, an agent left behind unused.
  const call = async (method: string, path: string, body: unknown, expected: number[]): Promise<any> => {
    for (let attempt = 1; ; attempt++) {
      const answer = await work.admin.client.request(method, path, body);
      if (expected.includes(answer.status)) return answer.body;
      if (answer.status !== 503 || attempt === 5) return work.admin.call(method, path, body, expected);
      await sleep(1000);
    }
  };
  const keyAgent = async (label: string) => {
    const key = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = { ...key.publicKey.export({ format: 'jwk' }), kid: 'bench', alg: 'ES256' };
    const created = await call('POST', '/admin/v1/agents', { name: label, token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [jwk] } }, [201]);
    await call('PUT', `/admin/v1/agents/${created.agent_id}/grants/${work.platformId}`, { scopes: SCOPES }, [200]);
    return { agent_id: created.agent_id as string, api_key_id: created.api_key_id as string, key: key.privateKey };
  };
  // Signed just before their round (an assertion lives at most CLIENT_ASSERTION_MAX_LIFETIME_SECONDS).
  const keyAgents: { api_key_id: string; key: KeyObject }[][] = [];
  const workloadSubjects: string[][] = [];
  for (let round = 0; round < opts.rounds; round++) {
    const agents = await pool(n, ctx.machine.cores * 4, (i) => keyAgent(`key-${round}-${i}`));
    keyAgents.push(agents);
    const bound = await pool(federated, ctx.machine.cores * 4, async (i) => {
      const agent = await keyAgent(`workload-${round}-${i}`);
      const subject = `system:serviceaccount:bench:worker-${round}-${i}`;
      await call('POST', `/admin/v1/workload-issuers/${issuer.issuer_id}/bindings`, { subject, agent_id: agent.agent_id }, [201, 409]);
      return subject;
    });
    workloadSubjects.push(bound);
  }
  ctx.log(`  ${n * opts.rounds} key agents and ${federated * opts.rounds} federated agents through the admin API in ${((performance.now() - seedStarted) / 1000).toFixed(1)}s (no argon2: agents without secrets)`);

  const signer = await startBareSigner(service.httpProcesses, 'async', opts.uvThreads);
  defer(() => signer.stop());
  const warmBodies = work.tokenBodies();
  const warmFixed = Array.from({ length: n }, (_, i) => warmBodies[i % warmBodies.length]!);
  const connections = opts.connections;
  const arm = (name: string, run: (round: number) => Promise<Measurement>): Arm<Measurement> => ({
    name,
    run: async (round) => {
      const m = { ...(await run(round)), name };
      ctx.log(`  round ${round + 1} ${name}: ${fmt(m.rps)} req/s over ${fmt(m.seconds, 2)} s, p99 ${fmt(m.p99, 1)} ms, non-2xx ${m.non2xx} ${JSON.stringify(m.statusCodes)}`);
      return m;
    },
  });
  const arms: Arm<Measurement>[] = [
    arm(`warm secret tokens (${n})`, () => fixedCount(service.publicUrl, TOKEN_PATH, JSON_HEADERS, warmFixed, connections)),
    arm(`first tokens, fresh key agents (${n})`, async (round) => {
      const bodies = await Promise.all(keyAgents[round]!.map(async (a) => form(await assertion(a.key, a.api_key_id), work.platformId)));
      return fixedCount(service.publicUrl, '/oauth2/token', FORM, bodies, connections);
    }),
    arm(`first tokens, fresh federated agents (${federated})`, async (round) => {
      const bodies = await Promise.all(workloadSubjects[round]!.map(async (subject) => form(await projectedToken(issuerKey.privateKey, subject), work.platformId)));
      return fixedCount(service.publicUrl, '/oauth2/token', FORM, bodies, connections);
    }),
    loadArm(ctx, 'bare signer (same processes)', () => signer.url, () => signer.requests, { note: signer.note }),
  ];
  ctx.log(`keyagents: ${opts.rounds} interleaved round(s), ${connections} connections ...`);
  const results = await interleave(ctx, opts.rounds, arms);

  const values = (name: string, f: (m: Measurement) => number) => (results[name] ?? []).map((m) => (m && m.non2xx === 0 && m.errors === 0 ? f(m) : undefined));
  const warm = `warm secret tokens (${n})`;
  const keys = `first tokens, fresh key agents (${n})`;
  const fed = `first tokens, fresh federated agents (${federated})`;
  const checks = [
    check('first tokens of fresh key agents / warm secret tokens (req/s)', pairedRatios(values(keys, (m) => m.rps), values(warm, (m) => m.rps)), { op: '>=', value: 0.7 }),
    check(`restart of ${n} key agents / ${n} warm tokens (seconds)`, pairedRatios(values(keys, (m) => m.seconds), values(warm, (m) => m.seconds)), { op: '<=', value: 1.5 }),
    check('first tokens of fresh federated agents / warm secret tokens (req/s)', pairedRatios(values(fed, (m) => m.rps), values(warm, (m) => m.rps)), null, 'info'),
    check('first tokens of fresh key agents / bare signer (req/s)', pairedRatios(values(keys, (m) => m.rps), values('bare signer (same processes)', (m) => m.rps)), null, 'info: the ceiling'),
  ];
  return {
    name: 'keyagents',
    text: [
      `agents without secrets (${opts.rounds} round(s), ${connections} connections; a refused or failed request voids that round's ratio):`,
      table(summaryRows(results), SUMMARY_HEADER),
      table(checkRows(checks), CHECK_HEADER),
    ],
    checks,
    data: { agents: n, federated, results },
  };
}

function form(assertionJwt: string, platformId: string): string {
  return new URLSearchParams({ grant_type: 'client_credentials', client_assertion_type: ASSERTION_TYPE, client_assertion: assertionJwt, audience: platformId }).toString();
}

function assertion(key: KeyObject, apiKeyId: string): Promise<string> {
  return new SignJWT({ jti: randomUUID() })
    .setProtectedHeader({ alg: 'ES256', kid: 'bench' })
    .setIssuer(apiKeyId)
    .setSubject(apiKeyId)
    .setAudience(ISSUER)
    .setIssuedAt()
    .setExpirationTime('2m')
    .sign(key);
}

function projectedToken(key: KeyObject, subject: string): Promise<string> {
  return new SignJWT({ 'kubernetes.io': { namespace: 'bench', serviceaccount: { name: subject.split(':').pop() } } })
    .setProtectedHeader({ alg: 'ES256', kid: 'sa' })
    .setIssuer(K8S_ISSUER)
    .setSubject(subject)
    .setAudience(ISSUER)
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(key);
}
