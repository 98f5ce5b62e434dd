// Resident memory of the embedded default (no DATABASE_URL: PGlite in DATA_DIR): peak until ready, at
// ready, and after an idle period, on a first start (a new DATA_DIR: initdb) and on a restart of the same
// DATA_DIR:
//   npm run bench -- --only embedded-memory [--idle-seconds 30]
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Scenario } from './types.js';
import { RssSampler } from '../lib/rss.js';

const MAIN = path.resolve(import.meta.dirname, '../../src/main.js');
const MiB = (bytes: number) => `${Math.round(bytes / 1048576)} MiB`;

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });

async function run(dataDir: string, label: string, idleSeconds: number): Promise<string> {
  const [port, adminPort] = [await freePort(), await freePort()];
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: String(port), ADMIN_HOST: '127.0.0.1', ADMIN_PORT: String(adminPort), DATA_DIR: dataDir, ADMIN_TOKEN: 'x'.repeat(32), LOG_LEVEL: 'warn', SHUTDOWN_DRAIN_SECONDS: '0' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const sampler = new RssSampler(child.pid!).start();
  const started = performance.now();
  for (;;) {
    const ok = await fetch(`http://127.0.0.1:${adminPort}/readyz`).then((r) => r.status === 200, () => false);
    if (ok) break;
    if (child.exitCode !== null) throw new Error(`${label}: the service exited`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const readyMs = performance.now() - started;
  sampler.sample();
  const peakToReady = sampler.peak;
  const atReady = currentRss(child.pid!);
  await new Promise((r) => setTimeout(r, idleSeconds * 1000));
  const idle = currentRss(child.pid!);
  sampler.stop();
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  return `${label.padEnd(12)} ready in ${(readyMs / 1000).toFixed(1)} s, peak ${MiB(peakToReady)}, at ready ${MiB(atReady)}, after ${idleSeconds} s idle ${MiB(idle)} (VmHWM ${MiB(sampler.hwm)})`;
}

function currentRss(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

export const embeddedMemory: Scenario = {
  name: 'embedded-memory',
  title: 'resident memory of the embedded default (PGlite) until ready, at ready and idle, first start and restart',
  byDefault: false,
  async run(ctx) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ace-embedded-memory-'));
    try {
      const lines = [await run(dir, 'first start', ctx.opts.idleSeconds), await run(dir, 'restart', ctx.opts.idleSeconds)];
      return { name: 'embedded-memory', text: [`Embedded default's memory\n${lines.join('\n')}`], checks: [], data: { lines } };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
