// In process, on the in-memory unit of work: the core's admin services make every change, its
// revocation entries and its audit event one unit. With the append failing, each revoking change fails
// with the store's 503 error and leaves the state, the log, the trail and the bus untouched; without the
// fault, it commits exactly its entries and one event, and the revocation notice goes out after.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/core/errors.js';
import type { Invalidation } from '../../src/core/ports/invalidation.js';
import { BY as by, memoryCore, type MemoryCore } from '../support/memory/core.js';

const scopes = [{ name: 'read' }, { name: 'write' }];

let core: MemoryCore;
let messages: Invalidation[];

beforeEach(async () => {
  core = await memoryCore();
  messages = [];
  core.bus.subscribe((m) => messages.push(m));
});

afterEach(() => core.stop());

/** Everything a change could touch: records, revocation log and sequences, audit events. */
const snapshot = () =>
  structuredClone({
    platforms: core.memory.platforms,
    agents: core.memory.agents,
    grants: core.memory.grants,
    keys: core.memory.keys,
    seqs: core.log.seqs,
    entries: core.log.entries,
    events: core.audit.events,
  });

async function seed() {
  const platform = await core.platforms.create({ name: 'P', scopes }, by);
  const { agent } = await core.agents.create('a', by);
  await core.agents.putGrant(agent.id, platform.id, ['read', 'write'], by);
  return { platform, agent };
}

/** The change fails with the store's 503 error and leaves everything (state, log, trail, bus) as it was. */
async function expectNothingApplied(change: () => Promise<unknown>): Promise<void> {
  const before = snapshot();
  const published = messages.length;
  core.memoryUow.faults.append = true;
  await expect(change()).rejects.toBeInstanceOf(StoreUnavailableError);
  core.memoryUow.faults.append = false;
  expect(snapshot()).toEqual(before);
  expect(messages.length).toBe(published);
}

/** Then the same change commits exactly `entries` entries and one event of `type`, and tells the bus after. */
async function expectApplied(change: () => Promise<unknown>, type: string, entries: number): Promise<void> {
  const [entriesBefore, eventsBefore] = [core.log.entries.length, core.audit.events.length];
  await change();
  expect(core.log.entries.length - entriesBefore).toBe(entries);
  expect(core.audit.events.slice(eventsBefore).map((e) => e.type)).toEqual([type]);
  expect(messages.at(-1)?.kind).toBe('revocation');
}

describe('revoking changes on the memory unit of work', () => {
  it('agent deactivation', async () => {
    const { agent } = await seed();
    const change = () => core.agents.update(agent.id, { status: 'inactive' }, by);
    await expectNothingApplied(change);
    expect((await core.memory.getAgent(agent.id))!.status).toBe('active');
    await expectApplied(change, 'agent.updated', 1);
    expect((await core.memory.getAgent(agent.id))!.status).toBe('inactive');
  });

  it('grant removal and narrowing', async () => {
    const { agent, platform } = await seed();
    await expectNothingApplied(() => core.agents.putGrant(agent.id, platform.id, ['read'], by));
    await expectApplied(() => core.agents.putGrant(agent.id, platform.id, ['read'], by), 'grant.put', 1);
    await expectNothingApplied(() => core.agents.deleteGrant(agent.id, platform.id, by));
    expect(await core.memory.listGrants(agent.id)).toHaveLength(1);
    await expectApplied(() => core.agents.deleteGrant(agent.id, platform.id, by), 'grant.deleted', 1);
    expect(await core.memory.listGrants(agent.id)).toHaveLength(0);
  });

  it('secret rotation without grace', async () => {
    const { agent } = await seed();
    const hashBefore = (await core.memory.getSecretHashes(agent.apiKeyId))!.current;
    await expectNothingApplied(() => core.agents.rotateSecret(agent.id, 0, by));
    await expectApplied(() => core.agents.rotateSecret(agent.id, 0, by), 'agent.secret_rotated', 1);
    expect((await core.memory.getSecretHashes(agent.apiKeyId))!.current).not.toBe(hashBefore);
  });

  it('platform suspension and dropping a held scope', async () => {
    const { platform } = await seed();
    await expectNothingApplied(() => core.platforms.update(platform.id, { scopes: [{ name: 'read' }] }, by));
    await expectApplied(() => core.platforms.update(platform.id, { scopes: [{ name: 'read' }] }, by), 'platform.updated', 1);
    await expectNothingApplied(() => core.platforms.update(platform.id, { status: 'suspended' }, by));
    expect((await core.memory.getPlatform(platform.id))!.status).toBe('active');
    await expectApplied(() => core.platforms.update(platform.id, { status: 'suspended' }, by), 'platform.updated', 1);
  });

  it('key retirement', async () => {
    await seed();
    await seed();
    const next = await core.keys.rotate(by); // "next" for an hour: retirable
    await expectNothingApplied(() => core.keys.retire(next.row.kid, by));
    expect(core.memory.keys.get(next.row.kid)!.retiredAt).toBeNull();
    // One entry in the feed of each of the two platforms.
    await expectApplied(() => core.keys.retire(next.row.kid, by), 'key.retired', 2);
    expect(core.memory.keys.get(next.row.kid)!.retiredAt).not.toBeNull();
  });
});

describe('non-revoking changes', () => {
  it('are not made when their audit event cannot be written', async () => {
    core.memoryUow.faults.auditInsert = true;
    await expect(core.agents.create('never', by)).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(core.platforms.create({ name: 'never', scopes }, by)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(core.memory.agents.size + core.memory.platforms.size).toBe(0);
    core.memoryUow.faults.auditInsert = false;
    await seed();
    expect(core.audit.events.map((e) => e.type)).toEqual(['platform.created', 'agent.created', 'grant.put']);
    expect(core.log.entries).toHaveLength(0); // a first grant takes nothing back
  });

  it('a refused change (not found, conflict) leaves nothing either', async () => {
    await expect(core.agents.update('00000000-0000-4000-8000-000000000000', { status: 'inactive' }, by)).rejects.toMatchObject({ code: 'not_found' });
    expect(core.audit.events).toHaveLength(0);
    expect(messages).toHaveLength(0);
  });
});
