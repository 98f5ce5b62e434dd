// Audit trail on/off: warm tokens against a service with AUDIT=off and one with the trail on (its
// default), alternating off, on, off, on … so that both see the same machine, each on a fresh service
// and database with the same seed. With Postgres, also the trail's size on disk per event (heap, TOAST
// and indexes of every partition, divided by the rows), measured on the last audit-on service.
import postgres from 'postgres';
import { childrenOf } from '../../kit/proc.js';
import { cpuSeconds, databaseBackendPids } from './cpu.js';
import { startBenchService, type BenchService } from './service.js';
import { Admin, tokenBody } from './seed.js';
import { measure } from './load.js';
import { prewarm } from './http.js';
import type { Measurement } from './report.js';

/** What the audit comparison needs of the bench's options. */
export interface AuditBenchOptions {
  embedded: boolean;
  connections: number;
  duration: number;
  warmup: number;
  cores: number;
  uvThreads: number;
  agents: number;
}

const TOKEN_PATH = '/api/v1/auth/token';
const JSON_HEADERS = { 'content-type': 'application/json' };

/**
 * CPU spent by the service's processes and by the Postgres backends serving its database. On a shared,
 * busy machine throughput swings with the neighbours' load, but CPU time per token does not: it is the
 * figure that says what the trail costs a CPU-bound service.
 */
async function cpuMeter(service: BenchService) {
  const servicePids = [service.pid, ...childrenOf(service.pid)];
  const backendPids = service.databaseUrl ? await databaseBackendPids(service.databaseUrl) : [];
  const read = () => ({
    service: servicePids.reduce((s, pid) => s + cpuSeconds(pid), 0),
    postgres: backendPids.reduce((s, pid) => s + cpuSeconds(pid), 0),
  });
  return { read };
}

export interface AuditComparison {
  off: Measurement[];
  on: Measurement[];
  /** Mean req/s with the trail on / mean with it off. */
  ratio: number;
  /** Worst p99 (ms) of the audit-on runs. */
  onP99: number;
  bytesPerEvent: number | null;
  events: number | null;
  tableBytes: number | null;
  /** CPU milliseconds per token (service processes + its Postgres backends), mean over rounds. */
  cpuMsPerTokenOff: number;
  cpuMsPerTokenOn: number;
}

async function readyWorkers(service: BenchService, expected: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  const ready = () => service.output().split('\n').filter((l) => l.includes('agent credential exchange ready')).length;
  while (Date.now() < deadline && ready() < expected) await new Promise((r) => setTimeout(r, 100));
}

async function diskPerEvent(databaseUrl: string): Promise<{ bytes: number; events: number }> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    // A partitioned table has no storage itself: sum over its partitions (heap + TOAST + indexes).
    const [{ bytes }] = await sql`SELECT coalesce(sum(pg_total_relation_size(relid)), 0)::bigint AS bytes FROM pg_partition_tree('audit_events')`;
    const [{ events }] = await sql`SELECT count(*)::bigint AS events FROM audit_events`;
    return { bytes: Number(bytes), events: Number(events) };
  } finally {
    await sql.end();
  }
}

export async function auditComparison(opts: AuditBenchOptions, log: (m: string) => void, rounds = 1): Promise<AuditComparison> {
  const off: Measurement[] = [];
  const on: Measurement[] = [];
  const cpuOff: number[] = [];
  const cpuOn: number[] = [];
  let disk: { bytes: number; events: number } | null = null;
  const expectedHttp = opts.embedded ? 1 : opts.cores;
  for (let round = 0; round < rounds; round++) {
    for (const audit of ['off', 'on'] as const) {
      // AUDIT_* tuning in the bench's own environment (e.g. AUDIT_FLUSH_MS=0) reaches both services.
      const tuning = Object.fromEntries(Object.entries(process.env).filter(([k, v]) => k.startsWith('AUDIT_') && v !== undefined)) as Record<string, string>;
      const service = await startBenchService({ embedded: opts.embedded, uvThreads: opts.uvThreads, env: { ...tuning, AUDIT: audit } });
      try {
        await readyWorkers(service, service.httpProcesses || expectedHttp);
        const admin = new Admin(service);
        const platform = await admin.createPlatform();
        const seeded = await admin.createAgents(opts.agents, platform.platform_id, `audit-${audit}`, opts.cores * 4);
        const bodies = seeded.agents.map((a) => tokenBody(a, platform.platform_id));
        await prewarm(`${service.publicUrl}${TOKEN_PATH}`, bodies, 4 * expectedHttp + 2);
        await new Promise((r) => setTimeout(r, 1000));
        let meter: Awaited<ReturnType<typeof cpuMeter>> | undefined;
        let before = { service: 0, postgres: 0 };
        const result = await measure({
          url: service.publicUrl,
          connections: opts.connections,
          duration: opts.duration,
          warmup: opts.warmup + 2,
          requests: bodies.map((body) => ({ method: 'POST', path: TOKEN_PATH, headers: JSON_HEADERS, body })),
          // After the warm-up every backend the service uses exists: count from here.
          beforeMeasure: async () => {
            meter = await cpuMeter(service);
            before = meter.read();
          },
        });
        const after = meter!.read();
        const cpuMs = ((after.service - before.service + after.postgres - before.postgres) * 1000) / Math.max(1, result.requests);
        const pgMs = ((after.postgres - before.postgres) * 1000) / Math.max(1, result.requests);
        const m: Measurement = {
          name: `token (warm), audit ${audit}`,
          ...result,
          note: `round ${round + 1}; CPU ${cpuMs.toFixed(3)} ms/token (Postgres ${pgMs.toFixed(3)})`,
        };
        (audit === 'on' ? on : off).push(m);
        (audit === 'on' ? cpuOn : cpuOff).push(cpuMs);
        log(`  audit ${audit}: ${Math.round(m.rps)} req/s, p50 ${m.p50.toFixed(1)} ms, p99 ${m.p99.toFixed(1)} ms, non-2xx ${m.non2xx}, errors ${m.errors}; CPU ${cpuMs.toFixed(3)} ms/token (Postgres backends ${pgMs.toFixed(3)})`);
        if (audit === 'on') {
          const text = await (await fetch(`${service.adminUrl}/metrics`)).text();
          const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
          const mean = value('ace_audit_batch_size_sum') / value('ace_audit_batch_size_count');
          m.note += `; ${mean.toFixed(1)} events per audit statement`;
          log(`  audit batches: ${mean.toFixed(1)} events per statement on average (warm-up included)`);
        }
        if (audit === 'on' && service.databaseUrl) {
          // Let the last batches commit, then weigh the table.
          await new Promise((r) => setTimeout(r, 1000));
          disk = await diskPerEvent(service.databaseUrl);
          log(`  trail on disk: ${disk.events} events, ${(disk.bytes / 2 ** 20).toFixed(1)} MiB, ${(disk.bytes / Math.max(1, disk.events)).toFixed(0)} bytes/event`);
        }
      } finally {
        await service.dispose();
      }
    }
  }
  const mean = (ms: Measurement[]) => ms.reduce((s, m) => s + m.rps, 0) / ms.length;
  return {
    off,
    on,
    ratio: mean(on) / mean(off),
    onP99: Math.max(...on.map((m) => m.p99)),
    bytesPerEvent: disk ? disk.bytes / Math.max(1, disk.events) : null,
    events: disk?.events ?? null,
    tableBytes: disk?.bytes ?? null,
    cpuMsPerTokenOff: cpuOff.reduce((a, b) => a + b, 0) / cpuOff.length,
    cpuMsPerTokenOn: cpuOn.reduce((a, b) => a + b, 0) / cpuOn.length,
  };
}
