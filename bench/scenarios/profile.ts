// Where the CPU of a warm token goes: runs warm-token load against the compiled service (Postgres + Redis,
// the bench's settings) and reports CPU milliseconds per token for each party on the machine — the
// service's main thread, its other threads (signing, argon2, libuv pool: RSA runs there), Redis, the
// Postgres backends, and the load generator — from /proc, so the figure holds on a busy machine too.
// With --cpu-prof, also the main thread's busiest functions (V8 sampling profile).
// Warm: then the bare RS256 signer (bench/limits/bare-signer.ts, crypto.sign on libuv's pool, one process) under
// the same load, its whole process's CPU per token beside the service's stages (issue 39 item 2: the service's
// non-HTTP threads within 1.15x of it). The audit row's cost is in the Postgres backends' row.
//
// With --cold, every request is an agent never seen before (bulk rows, one argon2 verification each).
//
//   npm run bench -- --only profile [--duration 10] [--connections 64] [--cold] [--cpu-prof] [--env NAME=value ...]
import { readdirSync, readFileSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import type { Scenario } from './types.js';
import { startBenchService } from '../lib/service.js';
import { cpuSeconds, databaseBackendPids, threadCpuSeconds } from '../lib/cpu.js';
import { hashSync } from '@node-rs/argon2';
import { Workload, ColdPool, BULK_SECRET, post, TOKEN_PATH } from '../lib/workload.js';
import { BulkAgents } from '../lib/bulk.js';
import { loadArgon2Options } from '../limits/argon2-options.js';
import { load } from '../lib/load.js';
import type { BenchContext, ScenarioReport } from '../lib/context.js';
import { startBareSigner } from '../lib/sides.js';

export const profile: Scenario = {
  name: 'profile',
  title: 'CPU ms per token of every party on the machine (service threads, Redis, Postgres, load generator); --cold, --cpu-prof, --env',
  byDefault: false,
  run: (ctx) => runProfile(ctx),
};

const pidsOf = (name: string) => {
  try {
    return execFileSync('pgrep', ['-x', name], { encoding: 'utf8' }).trim().split('\n').map(Number).filter(Boolean);
  } catch {
    return [];
  }
};

async function runProfile(ctx: BenchContext): Promise<ScenarioReport> {
  const { opts } = ctx;
  const seconds = opts.duration;
  const profDir = mkdtempSync(path.join(os.tmpdir(), 'ace-prof-'));
  const service = await startBenchService({
    embedded: false,
    uvThreads: opts.uvThreads,
    env: opts.serviceEnv,
    nodeArgs: opts.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [],
  });
  const text: string[] = [];
  let data: Record<string, unknown>;
  try {
    const work = new Workload(ctx, service);
    await work.seed(100);
    await work.prewarm(service.httpProcesses);
    let requests = post(TOKEN_PATH, work.tokenBodies());
    let cold: ColdPool | undefined;
    if (opts.cold) {
      const { options } = await loadArgon2Options();
      const bulk = new BulkAgents(service.databaseUrl!, hashSync(BULK_SECRET, options));
      await bulk.add(Math.ceil(200 * (seconds + 2)), 'cold');
      const ids = await bulk.apiKeyIds('cold');
      await bulk.settle();
      await bulk.end();
      cold = new ColdPool(ids.map((id) => JSON.stringify({ api_key_id: id, secret: BULK_SECRET, platform_id: work.platformId })));
      requests = cold.requests();
    }
    await load({ url: service.publicUrl, connections: opts.connections, duration: 2, requests, onStart: cold?.onStart });

    const backends = await databaseBackendPids(service.databaseUrl!);
    const redis = pidsOf('redis-server');
    const sum = (pids: number[]) => pids.reduce((total, pid) => total + cpuSeconds(pid), 0);
    const before = { process: cpuSeconds(service.pid), service: threadCpuSeconds(service.pid), redis: sum(redis), pg: sum(backends), self: process.cpuUsage() };
    const result = await load({ url: service.publicUrl, connections: opts.connections, duration: seconds, requests, onStart: cold?.onStart });
    if (cold?.exhausted) text.push('the pool of cold agents ran out: figures cover fewer seconds');
    const after = { process: cpuSeconds(service.pid), service: threadCpuSeconds(service.pid), redis: sum(redis), pg: sum(backends), self: process.cpuUsage(before.self) };

    const n = Math.max(1, result.ok2xx);
    const ms = (seconds: number) => (seconds * 1000) / n;
    let main = 0;
    let others = 0;
    for (const [tid, t] of after.service) {
      const d = t - (before.service.get(tid) ?? 0);
      if (tid === service.pid) main += d;
      else others += d; // signing thread, argon2 threads, libuv's pool (RSA): all named "node"
    }
    const rows: [string, number][] = [
      ['service main thread', ms(main)],
      ['service other threads', ms(others)],
      // The whole process, exited threads included (a replaced or retired thread takes its ticks out of the rows above).
      ['service process (all threads)', ms(after.process - before.process)],
      ['redis-server', ms(after.redis - before.redis)],
      ['postgres backends (its database)', ms(after.pg - before.pg)],
    ];
    rows.push(['load generator (this process)', ((after.self.user + after.self.system) / 1000) / n]);
    text.push(
      `Profile: ${opts.cold ? 'cold' : 'warm'} tokens: ${Math.round(result.rps)} req/s over ${seconds}s, ${opts.connections} connections, p50 ${result.p50} ms, p99 ${result.p99} ms, ` +
        `non-2xx ${result.non2xx} ${JSON.stringify(result.statusCodes)}; load average ${os.loadavg()[0].toFixed(2)}\n` +
        `CPU ms per token:\n${rows.map(([name, v]) => `  ${name.padEnd(36)} ${v.toFixed(3)}`).join('\n')}`,
    );
    data = { rps: result.rps, cpuMsPerToken: Object.fromEntries(rows) };
  } finally {
    await service.dispose();
  }
  if (!opts.cold) {
    const bare = await startBareSigner(1, 'async', opts.uvThreads);
    try {
      await load({ url: bare.url, connections: opts.connections, duration: 2, requests: bare.requests });
      const pids = bare.pids ?? [];
      const sum = () => pids.reduce((total, pid) => total + cpuSeconds(pid), 0);
      const before = sum();
      const result = await load({ url: bare.url, connections: opts.connections, duration: seconds, requests: bare.requests });
      const bareMs = ((sum() - before) * 1000) / Math.max(1, result.ok2xx);
      const service = data.cpuMsPerToken as Record<string, number>;
      text.push(
        `Bare RS256 signer (${bare.note}): ${Math.round(result.rps)} req/s; CPU ms per token, whole process ${bareMs.toFixed(3)}
` +
          `  service other threads / bare signer ${(service['service other threads'] / bareMs).toFixed(2)} (issue 39 item 2: <= 1.15)
` +
          `  service process / bare signer       ${(service['service process (all threads)'] / bareMs).toFixed(2)}
` +
          `  service + redis + postgres / bare   ${((service['service process (all threads)'] + service['redis-server'] + service['postgres backends (its database)']) / bareMs).toFixed(2)}`,
      );
      data = { ...data, bareSignerCpuMsPerToken: bareMs, bareSignerRps: result.rps };
    } finally {
      await bare.stop();
    }
  }
  // The service writes its profiles as it exits.
  if (opts.cpuProf) text.push(...summariseProfiles(profDir));
  return { name: 'profile', text, checks: [], data };
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

/** Self time per function in each profile written by the service (one per thread), one text block each. */
function summariseProfiles(dir: string): string[] {
  const blocks: string[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
    const profile = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as { nodes: ProfileNode[]; samples: number[] };
    const byId = new Map(profile.nodes.map((node) => [node.id, node]));
    const self = new Map<string, number>();
    for (const id of profile.samples) {
      const frame = byId.get(id)!.callFrame;
      const key = `${frame.functionName || '(anonymous)'} ${frame.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/dist\//, '')}:${frame.lineNumber + 1}`;
      self.set(key, (self.get(key) ?? 0) + 1);
    }
    const total = profile.samples.length;
    const idle = [...self].filter(([k]) => k.startsWith('(idle)')).reduce((s, [, v]) => s + v, 0);
    const busy = Math.max(1, total - idle);
    const top = [...self].filter(([k]) => !k.startsWith('(idle)')).sort((a, b) => b[1] - a[1]).slice(0, 25);
    blocks.push(
      `${file}: ${total} samples, idle ${((idle / total) * 100).toFixed(1)} %; top self time (% of busy samples):\n` +
        top.map(([key, count]) => `  ${((count / busy) * 100).toFixed(1).padStart(5)}  ${key}`).join('\n'),
    );
  }
  return [...blocks, `profiles: ${dir}`];
}
