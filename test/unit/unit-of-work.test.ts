// Issue #22 in process, on the in-memory unit of work: the core's admin services make every change, its
// revocation entries and its audit event one unit. With the append failing, each revoking change fails
// with the store's 503 error and leaves the state, the log, the trail and the bus untouched; without the
// fault, it commits exactly its entries and one event, and the revocation notice goes out after.
import { hash, verify } from '@node-rs/argon2';
import { beforeEach, describe, expect, it } from 'vitest';
import { AgentService } from '../../src/core/agents/agent-service.js';
import { PlatformService } from '../../src/core/platforms/platform-service.js';
import { KeyManager } from '../../src/core/keys/key-manager.js';
import { RevocationService } from '../../src/core/revocation/revocation-service.js';
import { NO_AUDIT } from '../../src/core/audit/events.js';
import { StoreUnavailableError } from '../../src/core/errors.js';
import type { SecretHasher } from '../../src/core/ports/crypto.js';
import type { Invalidation, InvalidationBus } from '../../src/core/ports/invalidation.js';
import { MemoryStore, type MemoryState } from '../support/memory/memory-store.js';

/** Real argon2id at the cheapest parameters: the services store and compare real hashes. */
const hasher: SecretHasher = {
  hashSecret: (secret, salt) => hash(secret, { salt, memoryCost: 1024, timeCost: 1, parallelism: 1, algorithm: 2 }),
  verifySecret: async ({ hashes, secret }) => {
    for (let i = 0; i < hashes.length; i++) if (await verify(hashes[i], secret)) return i;
    return -1;
  },
  refuseIfVerificationsFull: () => {},
};

class RecordingBus implements InvalidationBus {
  readonly messages: Invalidation[] = [];
  private readonly handlers: ((m: Invalidation) => void)[] = [];
  async publish(message: Invalidation) {
    this.messages.push(message);
    for (const handler of this.handlers) handler(message);
  }
  subscribe(handler: (m: Invalidation) => void) {
    this.handlers.push(handler);
  }
  async close() {}
}

const by = { actor: 'admin', clientAddress: '127.0.0.1' };
const scopes = [{ name: 'read' }, { name: 'write' }];

let store: MemoryStore;
let bus: RecordingBus;
let agents: AgentService;
let platforms: PlatformService;
let keys: KeyManager;

beforeEach(() => {
  store = new MemoryStore();
  bus = new RecordingBus();
  const revocations = new RevocationService({ bus, tokenTtlSeconds: 900, clockSkewSeconds: 30, issuedSlackSeconds: 2 });
  agents = new AgentService({ store, uow: store, hasher, revocations, apiKeyPrefix: 'ak_' });
  platforms = new PlatformService({ store, uow: store, revocations, enrichmentTimeoutMs: 100 });
  keys = new KeyManager({
    store,
    uow: store,
    bus,
    material: { generate: () => Promise.reject(new Error('not used')), decrypt: () => 'pem' },
    revocations,
    audit: NO_AUDIT,
    telemetry: { record: () => {} },
    tokenTtlSeconds: 900,
    clockSkewSeconds: 30,
    propagationSeconds: 3600,
    rotationIntervalSeconds: 0,
    refreshSeconds: 60,
  });
});

async function seed() {
  const platform = await platforms.create({ name: 'P', scopes }, by);
  const { agent } = await agents.create('a', by);
  await agents.putGrant(agent.id, platform.id, ['read', 'write'], by);
  return { platform, agent };
}

/** The change fails with the store's 503 error and leaves everything (state, log, trail, bus) as it was. */
async function expectNothingApplied(change: () => Promise<unknown>): Promise<void> {
  const before: MemoryState = structuredClone(store.state);
  const published = bus.messages.length;
  store.faults.append = true;
  await expect(change()).rejects.toBeInstanceOf(StoreUnavailableError);
  store.faults.append = false;
  expect(store.state).toEqual(before);
  expect(bus.messages.length).toBe(published);
}

/** Then the same change commits exactly `entries` entries and one event of `type`, and tells the bus after. */
async function expectApplied(change: () => Promise<unknown>, type: string, entries: number): Promise<void> {
  const [entriesBefore, eventsBefore] = [store.state.entries.length, store.state.events.length];
  await change();
  expect(store.state.entries.length - entriesBefore).toBe(entries);
  expect(store.state.events.slice(eventsBefore).map((e) => e.type)).toEqual([type]);
  expect(bus.messages.at(-1)?.kind).toBe('revocation');
}

describe('revoking changes on the memory unit of work', () => {
  it('agent deactivation', async () => {
    const { agent } = await seed();
    const change = () => agents.update(agent.id, { status: 'inactive' }, by);
    await expectNothingApplied(change);
    expect((await store.getAgent(agent.id))!.status).toBe('active');
    await expectApplied(change, 'agent.updated', 1);
    expect((await store.getAgent(agent.id))!.status).toBe('inactive');
  });

  it('grant removal and narrowing', async () => {
    const { agent, platform } = await seed();
    await expectNothingApplied(() => agents.putGrant(agent.id, platform.id, ['read'], by));
    await expectApplied(() => agents.putGrant(agent.id, platform.id, ['read'], by), 'grant.put', 1);
    await expectNothingApplied(() => agents.deleteGrant(agent.id, platform.id, by));
    expect(await store.listGrants(agent.id)).toHaveLength(1);
    await expectApplied(() => agents.deleteGrant(agent.id, platform.id, by), 'grant.deleted', 1);
    expect(await store.listGrants(agent.id)).toHaveLength(0);
  });

  it('secret rotation without grace', async () => {
    const { agent } = await seed();
    const hashBefore = (await store.getSecretHashes(agent.apiKeyId))!.current;
    await expectNothingApplied(() => agents.rotateSecret(agent.id, 0, by));
    await expectApplied(() => agents.rotateSecret(agent.id, 0, by), 'agent.secret_rotated', 1);
    expect((await store.getSecretHashes(agent.apiKeyId))!.current).not.toBe(hashBefore);
  });

  it('platform suspension and dropping a held scope', async () => {
    const { platform } = await seed();
    await expectNothingApplied(() => platforms.update(platform.id, { scopes: [{ name: 'read' }] }, by));
    await expectApplied(() => platforms.update(platform.id, { scopes: [{ name: 'read' }] }, by), 'platform.updated', 1);
    await expectNothingApplied(() => platforms.update(platform.id, { status: 'suspended' }, by));
    expect((await store.getPlatform(platform.id))!.status).toBe('active');
    await expectApplied(() => platforms.update(platform.id, { status: 'suspended' }, by), 'platform.updated', 1);
  });

  it('key retirement', async () => {
    await seed();
    await seed();
    const t = Date.now();
    store.state.keys.push(
      { kid: 'active', publicJwk: { kty: 'RSA', n: 'n', e: 'AQAB' }, privateKeyEncrypted: 'x', createdAt: new Date(t - 1000), activatesAt: new Date(t - 1000), retiredAt: null },
      { kid: 'next', publicJwk: { kty: 'RSA', n: 'n', e: 'AQAB' }, privateKeyEncrypted: 'x', createdAt: new Date(t), activatesAt: new Date(t + 3_600_000), retiredAt: null },
    );
    await expectNothingApplied(() => keys.retire('next', by));
    expect(store.state.keys.find((k) => k.kid === 'next')!.retiredAt).toBeNull();
    // One entry in the feed of each of the two platforms.
    await expectApplied(() => keys.retire('next', by), 'key.retired', 2);
    expect(store.state.keys.find((k) => k.kid === 'next')!.retiredAt).not.toBeNull();
  });
});

describe('non-revoking changes', () => {
  it('are not made when their audit event cannot be written', async () => {
    store.faults.auditInsert = true;
    await expect(agents.create('never', by)).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(platforms.create({ name: 'never', scopes }, by)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(store.state.agents.size + store.state.platforms.size).toBe(0);
    store.faults.auditInsert = false;
    await seed();
    expect(store.state.events.map((e) => e.type)).toEqual(['platform.created', 'agent.created', 'grant.put']);
    expect(store.state.entries).toHaveLength(0); // a first grant takes nothing back
  });

  it('a refused change (not found, conflict) leaves nothing either', async () => {
    await expect(agents.update('00000000-0000-4000-8000-000000000000', { status: 'inactive' }, by)).rejects.toMatchObject({ code: 'not_found' });
    expect(store.state.events).toHaveLength(0);
    expect(bus.messages).toHaveLength(0);
  });
});
