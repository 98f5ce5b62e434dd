// The embedded default's memory (docs/storage.md#memory-of-the-embedded-default): a service that
// should start on a laptop or a small pod peaks under 512 MiB on a first start (a new DATA_DIR) and
// settles under 256 MiB resident, on a first start and on a restart. Before, PGlite's initdb ran on the
// first start and the process peaked at ~800 MiB (VmHWM) and stayed ~400 MiB. Measured on the service
// process itself (/proc/PID/status): VmHWM is the kernel's own record of its peak, so no sample is missed.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AdminClient } from '../../kit/admin.js';
import { memoryBytes } from '../../kit/proc.js';
import { waitFor } from '../../kit/wait.js';
import { startService, type ServiceHandle } from '../support/service.js';

const MiB = 1024 * 1024;
const PEAK_BOUND = 512 * MiB;
const SETTLED_BOUND = 256 * MiB;
// The harness runs one argon2 thread; this is the default on a 2-core machine (ARGON2_THREADS = cores).
const env = { ARGON2_THREADS: '2', SIGN_THREADS: '1' };

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ace-embedded-memory-'));
let service: ServiceHandle | undefined;
afterAll(async () => {
  await service?.stop('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

/**
 * Resident memory once settled: polls until three samples in a row are under the bound (a generous
 * deadline; the assertion is on memory, not on time) and returns the last sample.
 */
async function settledRss(pid: number): Promise<number> {
  let rss = 0;
  let below = 0;
  await waitFor(
    'resident memory under the bound for three samples in a row',
    () => {
      rss = memoryBytes(pid, 'VmRSS');
      below = rss > 0 && rss < SETTLED_BOUND ? below + 1 : 0;
      return below >= 3;
    },
    60_000,
    500,
  ).catch(() => undefined);
  return rss;
}

describe('embedded default memory', () => {
  it('a first start on a new DATA_DIR peaks under 512 MiB and settles under 256 MiB', async () => {
    service = await startService({ mode: 'embedded', dataDir, env });
    const pid = service.process.pid!;
    const peak = memoryBytes(pid, 'VmHWM');
    expect(peak / MiB, 'VmHWM at ready (MiB)').toBeLessThan(PEAK_BOUND / MiB);
    // The build packs the pristine cluster (npm run build); without it PGlite's initdb runs and peaks higher.
    expect(service.output()).toContain('embedded database created from the pristine cluster');
    expect((await settledRss(pid)) / MiB, 'VmRSS once settled (MiB)').toBeLessThan(SETTLED_BOUND / MiB);
    // The unpacked cluster takes writes like any other.
    await new AdminClient(service).createAgent('before-restart');
  });

  it('a restart of that DATA_DIR settles under 256 MiB, with its data', async () => {
    expect((await service!.stop('SIGTERM')).code).toBe(0);
    service = await startService({ mode: 'embedded', dataDir, env });
    const pid = service.process.pid!;
    expect(service.output()).not.toContain('embedded database created');
    expect(memoryBytes(pid, 'VmHWM') / MiB, 'VmHWM at ready (MiB)').toBeLessThan(PEAK_BOUND / MiB);
    expect((await settledRss(pid)) / MiB, 'VmRSS once settled (MiB)').toBeLessThan(SETTLED_BOUND / MiB);
    const agents = (await new AdminClient(service).request('GET', '/admin/v1/agents')).body.agents as { name: string }[];
    expect(agents.map((agent) => agent.name)).toEqual(['before-restart']);
  });
});
