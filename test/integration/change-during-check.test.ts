// A change an operator makes while an agent's credential check runs is in that check's answer. A cold
// check reads the agent's view together with its secret hashes (one query), before argon2; after argon2
// that view is used only as an in-process cache entry read at the same moment would be (no invalidation
// has reached the service since, younger than LOCAL_CACHE_TTL_MS), else it is read again. Here every
// verification is held for 1.5 s by the test-only worker, and the change lands while it is held.
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson, type PlatformRecord } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { waitFor } from '../../kit/wait.js';

/** A service whose argon2 verifications are each held 1.5 s, and a token request that acts while held. */
function serviceWithHeldChecks(env: Record<string, string> = {}) {
  const startedFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'ace-check-')), 'started');
  const started = () => (existsSync(startedFile) ? readFileSync(startedFile, 'utf8').split('\n').length - 1 : 0);
  const held = {
    service: undefined as unknown as ServiceHandle,
    admin: undefined as unknown as AdminClient,
    /** Starts a cold token request, runs `change` once its argon2 check is running, returns the answer. */
    async tokenWith(change: (agentId: string, platform: PlatformRecord) => Promise<unknown>) {
      const { platform, agent } = await held.admin.seed(['orders:read']);
      const before = started();
      const answer = postJson(`${held.service.publicUrl}/api/v1/auth/token`, {
        api_key_id: agent.api_key_id,
        secret: agent.secret,
        platform_id: platform.platform_id,
      });
      await waitFor('the check to run', () => started() > before, 10_000, 10);
      await change(agent.agent_id, platform);
      return answer;
    },
  };

  beforeAll(async () => {
    held.service = await startService({
      mode: 'real',
      faultWorker: true,
      env: { ARGON2_THREADS: '1', FAULT_VERIFY_DELAY_MS: '1500', FAULT_VERIFY_STARTED_FILE: startedFile, ...env },
    });
    held.admin = new AdminClient(held.service);
  });

  afterAll(async () => {
    await held.service?.dispose();
  });

  return held;
}

describe('a change made through the admin API while a credential check runs', () => {
  const held = serviceWithHeldChecks();

  it('with no change, the token is issued (the view read with the hashes is used)', async () => {
    const response = await held.tokenWith(async () => {});
    expect(response.status).toBe(200);
  });

  it('an agent made inactive during its check gets 403 agent_inactive', async () => {
    const response = await held.tokenWith((agentId) => held.admin.patchAgent(agentId, { status: 'inactive' }));
    expect(response.status).toBe(403);
    expect(response.body.error_code).toBe('agent_inactive');
  });

  it('a grant revoked during the check gets 403 platform_access_denied', async () => {
    const response = await held.tokenWith((agentId, platform) => held.admin.revoke(agentId, platform.platform_id));
    expect(response.status).toBe(403);
    expect(response.body.error_code).toBe('platform_access_denied');
  });

  it('a platform disabled during the check gets 403 platform_access_denied', async () => {
    const response = await held.tokenWith((_, platform) => held.admin.patchPlatform(platform.platform_id, { status: 'disabled' }));
    expect(response.status).toBe(403);
    expect(response.body.error_code).toBe('platform_access_denied');
  });
});

describe('a change whose invalidation never arrives (written straight to Postgres)', () => {
  // The in-process cache's TTL is the safety net behind pub/sub: a view read before a check that outlasts
  // it is read again, as a cache entry of that age would be.
  const held = serviceWithHeldChecks({ LOCAL_CACHE_TTL_MS: '500' });

  it('is seen by a check that outlasted LOCAL_CACHE_TTL_MS', async () => {
    const sql = postgres(held.service.database!.url, { max: 1, onnotice: () => {} });
    try {
      const response = await held.tokenWith((agentId) => sql`UPDATE agents SET status = 'inactive' WHERE id = ${agentId}`);
      expect(response.status).toBe(403);
      expect(response.body.error_code).toBe('agent_inactive');
    } finally {
      await sql.end();
    }
  });
});
