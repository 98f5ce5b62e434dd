// The cluster-version gate, in process on memory ports: records of agents without secrets (a key agent, a
// key, a workload issuer, a binding) are refused with 409 conflict while an instance of an older release
// is live, and nothing is written; agents with secrets are not held back. The level each connection's
// application_name says (older releases carry none) is read by levelOf.
import { afterEach, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair } from 'jose';
import { ServiceError } from '../../src/core/errors.js';
import { CAPABILITY_CLIENT_KEYS } from '../../src/core/ports/cluster-versions.js';
import { APPLICATION_NAME, INSTANCE_LEVEL, levelOf } from '../../src/adapters/postgres/cluster-versions.js';
import { BY, memoryCore, type MemoryCore } from '../support/memory/core.js';

const started: MemoryCore[] = [];
afterEach(() => {
  for (const c of started.splice(0)) c.stop();
});

describe('cluster-version gate', () => {
  it('levelOf: an older release (no level) is 1, this build the client-key level, garbage counts as old', () => {
    expect(levelOf('agent-credential-exchange')).toBe(1);
    expect(levelOf(APPLICATION_NAME)).toBe(INSTANCE_LEVEL);
    expect(INSTANCE_LEVEL).toBeGreaterThanOrEqual(CAPABILITY_CLIENT_KEYS);
    expect(levelOf('agent-credential-exchange/x')).toBe(1);
    expect(levelOf('agent-credential-exchange/3')).toBe(3);
  });

  it('while an older instance is live: 409 conflict for every record of agents without secrets, nothing written; once gone: written', async () => {
    let older = 2;
    const asked: number[] = [];
    const core = await memoryCore({ cluster: { olderThan: async (level) => (asked.push(level), older) } });
    started.push(core);
    const jwk = { ...(await exportJWK((await generateKeyPair('ES256')).publicKey)), kid: 'k1', kty: 'EC' as const };
    const refused = await core.clientKeys.createKeyAgent('keyed', { keys: [jwk] }, BY).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ServiceError);
    expect((refused as ServiceError).code).toBe('conflict');
    expect((refused as ServiceError).message).toMatch(/older release.*2 connection.*finish the rollout/);
    expect(asked).toEqual([CAPABILITY_CLIENT_KEYS]);
    expect(await core.store.listAgents()).toEqual([]);
    await expect(core.clientKeys.createIssuer({ issuer: 'https://issuer.example', audience: 'ace', source: { keys: [jwk] } }, BY)).rejects.toMatchObject({ code: 'conflict' });
    // Agents with secrets: the older release reads them.
    await core.agents.create('with-secret', BY);

    older = 0;
    const agent = await core.clientKeys.createKeyAgent('keyed', { keys: [jwk] }, BY);
    older = 1;
    await expect(core.clientKeys.addKey(agent.id, { ...jwk, kid: 'k2' }, BY)).rejects.toMatchObject({ code: 'conflict' });
  });
});
