// A change an operator makes while an agent's credential check runs is in that check's answer. A cold
// check reads the agent's view together with its secret hashes (one query), before argon2; the view is
// used after argon2 only if no invalidation reached the service meanwhile, else it is read again. Here
// every verification is held for a while by the test-only worker, and the change lands while it is held.
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson, type PlatformRecord } from './support/admin.js';
import { startService, type ServiceHandle } from './support/service.js';
import { waitFor } from './support/faults.js';

const STARTED_FILE = path.join(mkdtempSync(path.join(os.tmpdir(), 'ace-check-')), 'started');

describe('a change made while a credential check runs', () => {
  let service: ServiceHandle;
  let admin: AdminClient;

  beforeAll(async () => {
    service = await startService({
      mode: 'real',
      faultWorker: true,
      env: { ARGON2_THREADS: '1', FAULT_VERIFY_DELAY_MS: '1500', FAULT_VERIFY_STARTED_FILE: STARTED_FILE },
    });
    admin = new AdminClient(service);
  });

  afterAll(async () => {
    await service?.dispose();
  });

  const started = () => (existsSync(STARTED_FILE) ? readFileSync(STARTED_FILE, 'utf8').split('\n').length - 1 : 0);

  /** Starts a cold token request, runs `change` once its argon2 check is running, and returns the answer. */
  async function tokenWith(change: (agentId: string, platform: PlatformRecord) => Promise<unknown>) {
    const { platform, agent } = await admin.seed(['orders:read']);
    const before = started();
    const answer = postJson(`${service.publicUrl}/api/v1/auth/token`, {
      api_key_id: agent.api_key_id,
      secret: agent.secret,
      platform_id: platform.platform_id,
    });
    await waitFor('the check to run', () => started() > before, 10_000, 10);
    await change(agent.agent_id, platform);
    return answer;
  }

  it('with no change, the token is issued (the view read with the hashes is used)', async () => {
    const response = await tokenWith(async () => {});
    expect(response.status).toBe(200);
  });

  it('an agent made inactive during its check gets 403 agent_inactive', async () => {
    const response = await tokenWith((agentId) => admin.patchAgent(agentId, { status: 'inactive' }));
    expect(response.status).toBe(403);
    expect(response.body.error_code).toBe('agent_inactive');
  });

  it('a grant revoked during the check gets 403 platform_access_denied', async () => {
    const response = await tokenWith((agentId, platform) => admin.revoke(agentId, platform.platform_id));
    expect(response.status).toBe(403);
    expect(response.body.error_code).toBe('platform_access_denied');
  });

  it('a platform disabled during the check gets 403 platform_access_denied', async () => {
    const response = await tokenWith((_, platform) => admin.patchPlatform(platform.platform_id, { status: 'disabled' }));
    expect(response.status).toBe(403);
    expect(response.body.error_code).toBe('platform_access_denied');
  });
});
