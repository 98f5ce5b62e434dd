// A full spool disk loses nothing: with Postgres unreachable (a TCP proxy in this process refuses, never
// the shared server) and DATA_DIR on an 8 MiB tmpfs, the disk is filled to its last byte several times
// while tokens are issued. Every 200 has its token.issued event once Postgres is back; every refusal is a
// 503 with Retry-After (never a 500); the spool gauge returns to 0 and the spool directory is empty.
// Needs root for `mount -t tmpfs`: CI runs as root and fails without it; elsewhere the file is skipped
// with a message.
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readdirSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson } from '../../kit/admin.js';
import { metricSum } from '../../kit/metrics.js';
import { sleep, waitFor } from '../../kit/wait.js';
import { createDatabase, startService, type ServiceHandle } from '../support/service.js';
import { TcpProxy } from '../support/faults.js';

const mountPoint = mkdtempSync(path.join(os.tmpdir(), 'ace-spool-tmpfs-'));
const mountError = ((): string | undefined => {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m,mode=0700', 'tmpfs', mountPoint], { stdio: 'pipe' });
    return undefined;
  } catch (error) {
    rmSync(mountPoint, { recursive: true, force: true });
    return (error as Error).message.split('\n')[0];
  }
})();
if (mountError) {
  const message = `audit-spool-full-disk: cannot mount a tmpfs (needs root): ${mountError}`;
  if (process.env.CI === 'true') throw new Error(`${message}; CI runs as root and must run it`);
  console.warn(`${message}; skipped`);
}

interface Load {
  jtis: string[];
  statuses: Map<number, number>;
  /** 503s without a usable Retry-After. */
  badRefusals: number;
  stop(): Promise<void>;
}

function startLoad(service: ServiceHandle, body: Record<string, unknown>, clients = 8): Load {
  const load: Load = { jtis: [], statuses: new Map(), badRefusals: 0, stop: async () => {} };
  let running = true;
  const loops = Array.from({ length: clients }, async () => {
    while (running) {
      const answer = await postJson(`${service.publicUrl}/api/v1/auth/token`, body);
      load.statuses.set(answer.status, (load.statuses.get(answer.status) ?? 0) + 1);
      if (answer.status === 200) {
        load.jtis.push(JSON.parse(Buffer.from(answer.body.access_token.split('.')[1], 'base64url').toString()).jti);
        continue;
      }
      if (answer.status === 503 && !(Number(answer.headers.get('retry-after')) >= 1)) load.badRefusals++;
      await sleep(5);
    }
  });
  load.stop = async () => {
    running = false;
    await Promise.all(loops);
  };
  return load;
}

/** Writes into `file` until the filesystem refuses: the disk is then full to its last page. */
function fillDisk(file: string): number {
  const fd = openSync(file, 'w');
  let written = 0;
  try {
    for (const size of [1 << 20, 64 << 10, 4096, 512, 1]) {
      const chunk = Buffer.alloc(size, 0x61);
      for (;;) {
        try {
          written += writeSync(fd, chunk);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
          break;
        }
      }
    }
  } finally {
    closeSync(fd);
  }
  return written;
}

describe.skipIf(mountError !== undefined)('audit spool on a full disk', { timeout: 180_000 }, () => {
  const disposals: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const dispose of disposals.reverse()) await dispose().catch((error) => console.warn('cleanup:', error));
    execFileSync('umount', [mountPoint]);
    rmSync(mountPoint, { recursive: true, force: true });
  });

  it('every token answered 200 while the disk filled up has its event after recovery; the spool gauge returns to 0', async () => {
    const database = await createDatabase();
    disposals.push(() => database.drop());
    const proxy = new TcpProxy(5432);
    const port = await proxy.listen();
    disposals.push(() => proxy.close());
    const url = new URL(database.url);
    url.port = String(port);
    const service = await startService({
      mode: 'real',
      database: { ...database, url: url.toString() },
      dataDir: mountPoint,
      env: {
        RATE_LIMIT_TOKEN_POINTS: '1000000',
        RATE_LIMIT_AUTH_FAIL_POINTS: '1000000',
        STORE_TIMEOUT_MS: '1000',
        AUDIT_WRITE_TIMEOUT_MS: '500',
        AUDIT_DRAIN_INTERVAL_MS: '200',
        // The agent's view stays in process for the whole outage: under test is the spool, not Redis.
        LOCAL_CACHE_TTL_MS: '600000',
      },
    });
    disposals.push(() => service.dispose());
    const metrics = async () => (await fetch(`${service.adminUrl}/metrics`)).text();

    const { platform, agent } = await new AdminClient(service).seed(['orders:read']);
    const body = { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id };
    expect((await postJson(`${service.publicUrl}/api/v1/auth/token`, body)).status).toBe(200);

    proxy.refuse();
    const filler = path.join(mountPoint, 'filler');
    const load = startLoad(service, body);
    const count = (status: number) => load.statuses.get(status) ?? 0;
    try {
      await waitFor('tokens while spooling', () => load.jtis.length >= 100, 60_000, 10);
      // Each round fills the disk while tokens are issued (the spool's last page takes a part of the next
      // batch, then nothing), waits for refusals, then frees the disk and waits for tokens again.
      for (let round = 0; round < 4; round++) {
        fillDisk(filler);
        const refused = count(503);
        await waitFor(`503s on the full disk (round ${round})`, () => count(503) >= refused + 20, 60_000, 10);
        unlinkSync(filler);
        const issued = load.jtis.length;
        await waitFor(`tokens once the disk has room (round ${round})`, () => load.jtis.length >= issued + 50, 60_000, 10);
      }
    } finally {
      await load.stop();
      proxy.forward();
    }
    expect(count(500)).toBe(0);
    expect(load.badRefusals).toBe(0);
    expect(metricSum(await metrics(), 'ace_audit_write_failures_total')).toBeGreaterThan(0);

    await waitFor('the spool gauge back to 0', async () => metricSum(await metrics(), 'ace_audit_spool_events') === 0, 60_000, 100).catch(async (error) => {
      throw new Error(`${error.message}: gauge ${metricSum(await metrics(), 'ace_audit_spool_events')}, spool ${readdirSync(path.join(mountPoint, 'audit-spool'))}`);
    });
    expect(readdirSync(path.join(mountPoint, 'audit-spool')).filter((name) => name.startsWith('spool-'))).toEqual([]);

    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      const rows = await sql`SELECT jti::text AS jti FROM audit_events WHERE type = 'token.issued'`;
      const inTrail = new Set(rows.map((r) => r.jti as string));
      const missing = load.jtis.filter((jti) => !inTrail.has(jti));
      expect(missing, `${missing.length} of ${load.jtis.length} tokens answered 200 have no event`).toEqual([]);
      expect(rows.length).toBe(inTrail.size);
    } finally {
      await sql.end();
    }
  });
});
