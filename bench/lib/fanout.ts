// Revocation fan-out: one revocation pushed to N WebSocket subscribers of one platform on one service
// process. Measures, per N: time to connect, p50/p99/max from the admin write to each subscriber's
// receipt (several revocations), and the service's resident memory per subscriber.
// The bench's scenario `fanout` (scenarios/fanout.ts): `npm run bench -- --only fanout [--embedded] [--fanout-sizes 1000,10000]`.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { memoryBytes } from '../../kit/proc.js';
import { sleep } from '../../kit/wait.js';
import { startBenchService } from './service.js';
import { Admin } from './seed.js';
import { table, fmt } from './report.js';

// `ws` (a dependency of the project) as the subscribers' client; typed loosely, it ships no types.
const WebSocket = createRequire(import.meta.url)('ws') as new (url: string, options?: { headers?: Record<string, string> }) => {
  on(event: 'open' | 'close' | 'error', listener: (...args: unknown[]) => void): void;
  on(event: 'message', listener: (data: Buffer) => void): void;
  terminate(): void;
};

export interface FanoutPoint {
  subscribers: number;
  connect_seconds: number;
  revocations: number;
  receipts: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
  /** The service's own ace_revocation_publish_to_send_seconds (admin write to uWS publish), mean. */
  service_send_mean_ms: number;
  rss_before_mib: number;
  rss_after_mib: number;
  bytes_per_subscriber: number;
  note?: string;
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];

function openFiles(): number {
  try {
    return Number(execFileSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).trim()) || Infinity;
  } catch {
    return Infinity;
  }
}

export async function revocationFanout(options: { embedded: boolean; sizes: number[]; uvThreads: number; revocations?: number; log: (m: string) => void }): Promise<FanoutPoint[]> {
  const { log } = options;
  const points: FanoutPoint[] = [];
  const limit = openFiles();
  for (const n of options.sizes) {
    if (n + 200 > limit) {
      log(`fan-out ${n}: skipped, ulimit -n is ${limit}`);
      points.push({ subscribers: n, connect_seconds: 0, revocations: 0, receipts: 0, p50_ms: 0, p99_ms: 0, max_ms: 0, service_send_mean_ms: 0, rss_before_mib: 0, rss_after_mib: 0, bytes_per_subscriber: 0, note: `skipped: ulimit -n ${limit}` });
      continue;
    }
    // A fresh single-process service per size, so the memory baseline is not left over from the last size.
    const service = await startBenchService({ embedded: options.embedded, uvThreads: options.uvThreads, env: { WORKERS: '1', REVOCATION_HEARTBEAT_SECONDS: '300', REVOCATION_WS_MAX_PER_ADDRESS: String(n + 16), REVOCATION_WS_MAX: String(n + 16) } });
    try {
      const admin = new Admin(service);
      const { platform_id } = await admin.createPlatform();
      const feed = `${service.publicUrl.replace(/^http/, 'ws')}/api/v1/platforms/${platform_id}/revocations/ws`;
      // Every subscriber reads the feed with the platform's feed token (all from this one address: the caps are raised above).
      const { feed_token } = (await admin.call('POST', `/admin/v1/platforms/${platform_id}/feed-credentials`)) as { feed_token: string };
      // One subscriber first: code paths warm, so the baseline holds what any running service holds.
      await admin.call('PATCH', `/admin/v1/platforms/${platform_id}`, { status: 'suspended' });
      await sleep(1500);
      const before = memoryBytes(service.pid);
      const sockets: InstanceType<typeof WebSocket>[] = [];
      // The time of each subscriber's latest document, and how many it has had.
      const lastAt = new Float64Array(n);
      const got = new Int32Array(n);
      const started = performance.now();
      let next = 0;
      const connectOne = (i: number) =>
        new Promise<void>((resolve, reject) => {
          const socket = new WebSocket(feed, { headers: { authorization: `Bearer ${feed_token}` } });
          sockets[i] = socket;
          socket.on('message', (data: Buffer) => {
            if (data[0] === 0x7b) return; // heartbeat
            lastAt[i] = performance.now();
            if (++got[i] === 1) resolve(); // the catch-up document: subscribed
          });
          socket.on('error', reject);
        });
      await Promise.all(
        Array.from({ length: 200 }, async () => {
          while (next < n) await connectOne(next++);
        }),
      );
      const connectSeconds = (performance.now() - started) / 1000;
      await sleep(1500);
      const after = memoryBytes(service.pid);
      log(`fan-out ${n}: connected in ${connectSeconds.toFixed(1)} s; service RSS ${fmt((after - before) / 2 ** 20)} MiB more`);

      const samples: number[] = [];
      const rounds = options.revocations ?? 5;
      for (let round = 0; round < rounds; round++) {
        const expected = got.map((c) => c + 1);
        const t0 = performance.now();
        // A suspension appends one platform-wide entry each time: one publish to the platform's topic.
        await admin.call('PATCH', `/admin/v1/platforms/${platform_id}`, { status: 'suspended' });
        const deadline = Date.now() + 30_000;
        while (got.some((c, i) => c < expected[i]) && Date.now() < deadline) await sleep(5);
        for (let i = 0; i < n; i++) if (got[i] >= expected[i]) samples.push(lastAt[i] - t0);
        await sleep(300);
      }
      samples.sort((a, b) => a - b);
      const metrics = await (await fetch(`${service.adminUrl}/metrics`)).text();
      const metric = (name: string) => Number(new RegExp(`^${name} ([0-9.e+-]+)$`, 'm').exec(metrics)?.[1] ?? NaN);
      const point: FanoutPoint = {
        subscribers: n,
        connect_seconds: connectSeconds,
        revocations: rounds,
        receipts: samples.length,
        p50_ms: pct(samples, 50),
        p99_ms: pct(samples, 99),
        max_ms: samples.at(-1) ?? 0,
        service_send_mean_ms: (metric('ace_revocation_publish_to_send_seconds_sum') / metric('ace_revocation_publish_to_send_seconds_count')) * 1000,
        rss_before_mib: before / 2 ** 20,
        rss_after_mib: after / 2 ** 20,
        bytes_per_subscriber: Math.round((after - before) / n),
      };
      points.push(point);
      log(`fan-out ${n}: ${samples.length}/${n * rounds} receipts, p50 ${fmt(point.p50_ms, 1)} ms, p99 ${fmt(point.p99_ms, 1)} ms, ${point.bytes_per_subscriber} B/subscriber`);
      for (const socket of sockets) socket?.terminate();
    } finally {
      await service.dispose();
    }
  }
  return points;
}

export function fanoutTable(points: FanoutPoint[]): string {
  return table(
    points.map((p) => [
      fmt(p.subscribers),
      fmt(p.connect_seconds, 1),
      `${p.receipts}/${p.subscribers * p.revocations}`,
      fmt(p.p50_ms, 1),
      fmt(p.p99_ms, 1),
      fmt(p.max_ms, 1),
      fmt(p.service_send_mean_ms, 1),
      fmt(p.bytes_per_subscriber),
      p.note ?? '',
    ]),
    ['WS subscribers', 'connect s', 'receipts', 'p50 ms', 'p99 ms', 'max ms', 'service write→publish mean ms', 'RSS B/subscriber', 'note'],
  );
}
