// The embedded default (PGlite) forces every acknowledged write to the disk: the service runs under strace,
// and N admin writes (each one committed transaction) must cost at least N fsync/fdatasync calls. Before,
// PGlite ran with fsync off (`-F`), and even with it on issued none (its NODEFS files had no fsync):
// strace counted 0. Skipped when strace is not installed or may not trace here.
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { waitFor } from '../../kit/wait.js';
import { missingOutsideCi } from '../support/tools.js';

const COMMITS = 20;
const straceWorks = (() => {
  const probe = spawnSync('strace', ['-f', '-e', 'trace=fsync', '-o', '/dev/null', 'true'], { stdio: 'ignore' });
  return probe.error === undefined && probe.status === 0;
})();

describe.skipIf(missingOutsideCi(!straceWorks, 'a working strace (apt-get install -y strace), in CI a failure'))('embedded default durability (strace)', () => {
  let service: ServiceHandle;
  let admin: AdminClient;

  beforeAll(async () => {
    // strace writes its lines to its own stderr, which the harness collects with the service's output.
    service = await startService({ mode: 'embedded', wrapWith: ['strace', '-f', '-qq', '-e', 'trace=fsync,fdatasync'] });
    admin = new AdminClient(service);
  });

  afterAll(async () => {
    await service?.dispose();
  });

  const syncs = () => (service.output().match(/^(?:\[pid\s+)?\d*\]?\s*(?:fsync|fdatasync)\(\d+\)\s+=\s+0$/gm) ?? []).length;

  it(`${COMMITS} acknowledged admin writes cost at least ${COMMITS} fsync calls`, async () => {
    await admin.createAgent('warm-up'); // first write: anything lazy happens here
    const before = syncs();
    for (let i = 0; i < COMMITS; i++) await admin.createAgent(`durable-${i}`);
    // Each answer came after its COMMIT, and the COMMIT after its fsync: no waiting needed, but strace's
    // lines reach us through a pipe.
    await waitFor(`${COMMITS} fsync calls`, () => syncs() - before >= COMMITS, 10_000).catch(() => undefined);
    const counted = syncs() - before;
    expect(counted, `fsync/fdatasync calls over ${COMMITS} commits`).toBeGreaterThanOrEqual(COMMITS);
    expect((await admin.request('GET', '/admin/v1/agents')).body.agents.length).toBe(COMMITS + 1);
  });
});
