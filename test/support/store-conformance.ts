// One behavioural suite for the Store interface and the unit of work's admin writes, run against every
// implementation (Postgres, PGlite, the cached store over Redis or in process, memory). Records are written
// as the service writes them, through the unit of work, and read back through the Store. A new
// implementation or a cache change must pass it unchanged.
import { randomBytes, randomUUID } from 'node:crypto';
import { sleep } from '../../kit/wait.js';
import { expect, it } from 'vitest';
import type { PlatformInput, SigningKeyRow } from '../../src/core/model.js';
import type { Store } from '../../src/core/ports/store.js';
import type { AdminWrites, UnitOfWork } from '../../src/core/ports/unit-of-work.js';

export interface StoreUnderTest {
  store: Store;
  /**
   * A second view of the same records, as another instance sees them (its own caches, the shared Redis and
   * invalidation bus); the plain store again where there is no cache.
   */
  peer: Store;
  /** The unit of work writing the records `store` reads (wrapped by the cache where there is one). */
  uow: UnitOfWork;
  /** Two sessions can hold transactions at once (not PGlite: one session, so the embedded pool has one connection). */
  concurrentSessions: boolean;
}

export const platformInput = (over: Partial<PlatformInput> = {}): PlatformInput => ({
  name: `platform ${randomBytes(3).toString('hex')}`,
  domain: null,
  status: 'active',
  verificationStatus: 'verified',
  scopes: [
    { name: 'orders:read', description: 'Read orders' },
    { name: 'orders:write', description: 'Write orders' },
  ],
  routes: [{ method: 'GET', path: '/orders', scopes: ['orders:read'] }],
  resources: [],
  ...over,
});

const agentInput = () => ({ name: `agent ${randomBytes(3).toString('hex')}`, apiKeyId: `ak_${randomBytes(8).toString('hex')}`, secretHash: `$hash$${randomUUID()}` });

/** Polls until `check` passes: invalidation travels over a bus, so a peer sees it soon, not at once. */
async function eventually(check: () => Promise<void>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await sleep(20);
    }
  }
}

/** One admin write (or a read a change decides on) in a unit of work of its own. */
export function writeThrough(uow: UnitOfWork) {
  return <T>(fn: (writes: AdminWrites) => Promise<T>): Promise<T> => uow.run((tx) => fn(tx.store));
}

export function storeConformance(get: () => StoreUnderTest): void {
  const write = <T>(fn: (writes: AdminWrites) => Promise<T>) => writeThrough(get().uow)(fn);
  it('creates, reads, lists and updates platforms', async () => {
    const { store } = get();
    const created = await write((w) => w.createPlatform(platformInput({ domain: 'shop.example' })));
    expect(created).toMatchObject({ domain: 'shop.example', status: 'active', verificationStatus: 'verified' });
    expect(await store.getPlatform(created.id)).toEqual(created);
    expect((await store.listPlatforms()).map((p) => p.id)).toContain(created.id);
    const updated = await write((w) => w.updatePlatform(created.id, { status: 'suspended', name: 'renamed' }));
    expect(updated).toMatchObject({ id: created.id, status: 'suspended', name: 'renamed', domain: 'shop.example' });
    expect(await store.getPlatform(created.id)).toMatchObject({ status: 'suspended', name: 'renamed' });
    expect(await store.getPlatform(randomUUID())).toBeNull();
    expect(await write((w) => w.updatePlatform(randomUUID(), { name: 'x' }))).toBeNull();
  });

  it('creates, reads, lists and updates agents; the token view follows status and grants', async () => {
    const { store } = get();
    const input = agentInput();
    const agent = await write((w) => w.createAgent(input));
    expect(agent).toMatchObject({ name: input.name, apiKeyId: input.apiKeyId, status: 'active' });
    expect(await store.getAgent(agent.id)).toEqual(agent);
    expect((await store.listAgents()).map((a) => a.id)).toContain(agent.id);
    expect(await store.getAgentView(input.apiKeyId)).toEqual({ agentId: agent.id, apiKeyId: input.apiKeyId, status: 'active', grants: {} });

    const platform = await write((w) => w.createPlatform(platformInput()));
    await write((w) => w.putGrant(agent.id, platform.id, ['orders:read']));
    expect((await store.getAgentView(input.apiKeyId))?.grants).toEqual({ [platform.id]: { scopes: ['orders:read'], platformStatus: 'active' } });

    expect(await write((w) => w.updateAgent(agent.id, { status: 'inactive' }))).toMatchObject({ status: 'inactive', name: input.name });
    expect((await store.getAgentView(input.apiKeyId))?.status).toBe('inactive');
    expect(await store.getAgentView(`ak_${randomBytes(8).toString('hex')}`)).toBeNull();
    expect(await write((w) => w.updateAgent(randomUUID(), { status: 'inactive' }))).toBeNull();
  });

  it('keeps a platform\'s resource identifiers; one held by another platform is a conflict, on create and on update', async () => {
    const { store } = get();
    const mcp = `https://${randomBytes(4).toString('hex')}.example/mcp`;
    const a = await write((w) => w.createPlatform(platformInput({ resources: [mcp, 'http://127.0.0.1:3000/mcp'] })));
    expect((await store.getPlatform(a.id))?.resources).toEqual([mcp, 'http://127.0.0.1:3000/mcp']);
    await expect(write((w) => w.createPlatform(platformInput({ resources: [mcp] })))).rejects.toMatchObject({ code: 'conflict' });
    const b = await write((w) => w.createPlatform(platformInput({ resources: [] })));
    await expect(write((w) => w.updatePlatform(b.id, { resources: ['http://127.0.0.1:3000/mcp'] }))).rejects.toMatchObject({ code: 'conflict' });
    expect((await store.getPlatform(b.id))?.resources).toEqual([]);
    // Given up by one platform, an identifier is free for another; a platform may rewrite its own list.
    await write((w) => w.updatePlatform(a.id, { resources: [mcp] }));
    expect((await write((w) => w.updatePlatform(b.id, { resources: ['http://127.0.0.1:3000/mcp'] })))?.resources).toEqual(['http://127.0.0.1:3000/mcp']);
    expect((await write((w) => w.updatePlatform(a.id, { name: 'renamed' })))?.resources).toEqual([mcp]);
  });

  it('a verified domain belongs to one platform, in any case; pending ones may repeat', async () => {
    const { store } = get();
    const domain = `${randomBytes(4).toString('hex')}.example`;
    await write((w) => w.createPlatform(platformInput({ domain, verificationStatus: 'verified' })));
    await expect(write((w) => w.createPlatform(platformInput({ domain: domain.toUpperCase(), verificationStatus: 'verified' })))).rejects.toMatchObject({ code: 'conflict' });
    const pending = await write((w) => w.createPlatform(platformInput({ domain, verificationStatus: 'pending' })));
    await expect(write((w) => w.updatePlatform(pending.id, { verificationStatus: 'verified' }))).rejects.toMatchObject({ code: 'conflict' });
    expect((await store.getPlatform(pending.id))?.verificationStatus).toBe('pending');
  });

  it('puts, replaces, lists and deletes grants; knows who holds one on a platform', async () => {
    const { store } = get();
    const a = await write((w) => w.createAgent(agentInput()));
    const b = await write((w) => w.createAgent(agentInput()));
    const platform = await write((w) => w.createPlatform(platformInput()));
    await write((w) => w.putGrant(a.id, platform.id, ['orders:read']));
    const replaced = await write((w) => w.putGrant(a.id, platform.id, ['orders:read', 'orders:write']));
    expect(replaced).toMatchObject({ agentId: a.id, platformId: platform.id, scopes: ['orders:read', 'orders:write'] });
    await write((w) => w.putGrant(b.id, platform.id, ['orders:write']));
    expect((await store.listGrants(a.id)).map((g) => g.scopes)).toEqual([['orders:read', 'orders:write']]);
    expect((await write((w) => w.apiKeyIdsOnPlatform(platform.id))).sort()).toEqual([a.apiKeyId, b.apiKeyId].sort());
    expect(await write((w) => w.deleteGrant(a.id, platform.id))).toBe(true);
    expect(await write((w) => w.deleteGrant(a.id, platform.id))).toBe(false);
    expect(await store.listGrants(a.id)).toEqual([]);
    expect((await store.getAgentView(a.apiKeyId))?.grants).toEqual({});
  });

  it('dropping a scope from a platform removes it from every grant, and the token view shows it', async () => {
    const { store } = get();
    const agent = await write((w) => w.createAgent(agentInput()));
    const platform = await write((w) => w.createPlatform(platformInput()));
    await write((w) => w.putGrant(agent.id, platform.id, ['orders:read', 'orders:write']));
    expect((await store.getAgentView(agent.apiKeyId))?.grants[platform.id]?.scopes).toEqual(['orders:read', 'orders:write']);
    await write((w) => w.updatePlatform(platform.id, { scopes: [{ name: 'orders:read', description: 'Read orders' }] }));
    expect((await store.listGrants(agent.id))[0]?.scopes).toEqual(['orders:read']);
    expect((await store.getAgentView(agent.apiKeyId))?.grants[platform.id]?.scopes).toEqual(['orders:read']);
  });

  it('a platform status change reaches the token view of every agent holding a grant on it', async () => {
    const { store, peer } = get();
    const agent = await write((w) => w.createAgent(agentInput()));
    const platform = await write((w) => w.createPlatform(platformInput()));
    await write((w) => w.putGrant(agent.id, platform.id, ['orders:read']));
    // Both instances have read (and may have cached) the view before the change.
    expect((await store.getAgentView(agent.apiKeyId))?.grants[platform.id]?.platformStatus).toBe('active');
    expect((await peer.getAgentView(agent.apiKeyId))?.grants[platform.id]?.platformStatus).toBe('active');
    await write((w) => w.updatePlatform(platform.id, { status: 'disabled' }));
    expect((await store.getAgentView(agent.apiKeyId))?.grants[platform.id]?.platformStatus).toBe('disabled');
    expect((await store.getPlatform(platform.id))?.status).toBe('disabled');
    await eventually(async () => {
      expect((await peer.getAgentView(agent.apiKeyId))?.grants[platform.id]?.platformStatus).toBe('disabled');
      expect((await peer.getPlatform(platform.id))?.status).toBe('disabled');
    });
  });

  it('every write is seen by another instance that had the old record cached', async () => {
    const { store, peer } = get();
    const agent = await write((w) => w.createAgent(agentInput()));
    const platform = await write((w) => w.createPlatform(platformInput()));
    expect((await peer.getAgentView(agent.apiKeyId))?.status).toBe('active');
    await write((w) => w.updateAgent(agent.id, { status: 'inactive' }));
    await eventually(async () => expect((await peer.getAgentView(agent.apiKeyId))?.status).toBe('inactive'));
    await write((w) => w.putGrant(agent.id, platform.id, ['orders:read']));
    await eventually(async () => expect(Object.keys((await peer.getAgentView(agent.apiKeyId))?.grants ?? {})).toEqual([platform.id]));
    await write((w) => w.deleteGrant(agent.id, platform.id));
    await eventually(async () => expect((await peer.getAgentView(agent.apiKeyId))?.grants).toEqual({}));
  });

  it('reads the secret hashes and the view together; such a view is not used once the agent changed', async () => {
    const { store, peer } = get();
    const platform = await write((w) => w.createPlatform(platformInput()));
    const input = agentInput();
    const agent = await write((w) => w.createAgent(input));
    await write((w) => w.putGrant(agent.id, platform.id, ['orders:read']));
    const credentials = (await store.getAgentCredentials(input.apiKeyId))!;
    expect(credentials.hashes).toEqual(await store.getSecretHashes(input.apiKeyId));
    expect(credentials.view).toEqual(await store.getAgentView(input.apiKeyId));
    expect(await store.getAgentView(input.apiKeyId, credentials)).toEqual(credentials.view);
    expect(await store.getAgentCredentials(`ak_${randomBytes(8).toString('hex')}`)).toBeNull();

    // A change after the read (here, and through the bus at a peer) makes the view be read again.
    const atPeer = (await peer.getAgentCredentials(input.apiKeyId))!;
    await write((w) => w.updateAgent(agent.id, { status: 'inactive' }));
    expect((await store.getAgentView(input.apiKeyId, credentials))?.status).toBe('inactive');
    await eventually(async () => expect((await peer.getAgentView(input.apiKeyId, atPeer))?.status).toBe('inactive'));
    const again = (await store.getAgentCredentials(input.apiKeyId))!;
    await write((w) => w.updatePlatform(platform.id, { status: 'disabled' }));
    expect((await store.getAgentView(input.apiKeyId, again))?.grants[platform.id]?.platformStatus).toBe('disabled');
  });

  it('a unit of work that fails applies nothing: its reads see its writes, the store none of them', async () => {
    const { store, uow } = get();
    const input = agentInput();
    const refused = new Error('refused inside the unit of work');
    await expect(
      uow.run(async (tx) => {
        const agent = await tx.store.createAgent(input);
        if ((await tx.store.getAgent(agent.id))?.apiKeyId !== input.apiKeyId) throw new Error('the transaction does not see its own write');
        throw refused;
      }),
    ).rejects.toBe(refused);
    expect(await store.getSecretHashes(input.apiKeyId)).toBeNull();
    expect(await store.getAgentView(input.apiKeyId)).toBeNull();
    expect((await store.listAgents()).map((a) => a.apiKeyId)).not.toContain(input.apiKeyId);
  });

  it('rotating a secret keeps the previous hash only while its grace lasts', async () => {
    const { store } = get();
    const input = agentInput();
    const agent = await write((w) => w.createAgent(input));
    expect(await store.getSecretHashes(input.apiKeyId)).toEqual({ agentId: agent.id, current: input.secretHash, previous: null, previousExpiresAt: null });
    const until = new Date(Date.now() + 60_000);
    await write((w) => w.rotateSecret(agent.id, 'second', until));
    const graced = await store.getSecretHashes(input.apiKeyId);
    expect(graced).toMatchObject({ current: 'second', previous: input.secretHash });
    expect(graced?.previousExpiresAt?.getTime()).toBe(until.getTime());
    await write((w) => w.rotateSecret(agent.id, 'third', null));
    expect(await store.getSecretHashes(input.apiKeyId)).toMatchObject({ current: 'third', previous: null, previousExpiresAt: null });
    await write((w) => w.rotateSecret(agent.id, 'fourth', new Date(Date.now() - 1000)));
    expect(await store.getSecretHashes(input.apiKeyId)).toMatchObject({ current: 'fourth', previous: null });
    expect(await store.getSecretHashes(`ak_${randomBytes(8).toString('hex')}`)).toBeNull();
    expect(await write((w) => w.rotateSecret(randomUUID(), 'x', null))).toBeNull();
  });

  const keyRow = (): SigningKeyRow => {
    const now = Math.floor(Date.now() / 1000) * 1000;
    return {
      kid: `kid-${randomBytes(6).toString('hex')}`,
      publicJwk: { kty: 'RSA', n: 'bW9kdWx1cw', e: 'AQAB' },
      privateKeyEncrypted: 'ciphertext',
      createdAt: new Date(now),
      activatesAt: new Date(now + 60_000),
      retiredAt: null,
    };
  };

  it('signing keys are written under the cluster lock and read back as written', async () => {
    const { store, peer } = get();
    const row = keyRow();
    expect(await store.withLock(`conformance:${row.kid}`, true, async (writer) => {
      await writer.insertSigningKey(row);
      return (await writer.listSigningKeys()).some((k) => k.kid === row.kid);
    })).toBe(true);
    expect((await store.listSigningKeys()).find((k) => k.kid === row.kid)).toEqual(row);
    const retiredAt = new Date(row.activatesAt.getTime() + 1000);
    await peer.withLock(`conformance:${row.kid}`, false, (writer) => writer.updateSigningKey(row.kid, { retiredAt }));
    const [read] = (await peer.listSigningKeys()).filter((k) => k.kid === row.kid);
    expect(read.retiredAt?.getTime()).toBe(retiredAt.getTime());
    expect(read.activatesAt.getTime()).toBe(row.activatesAt.getTime());
  });

  it('a second holder cannot take the cluster lock while it is held', async (context) => {
    const { store, peer, concurrentSessions } = get();
    if (!concurrentSessions) context.skip();
    const lock = `conformance:${randomBytes(6).toString('hex')}`;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    const holder = store.withLock(lock, true, async () => {
      entered();
      await held;
      return 'done';
    });
    await inside;
    expect(await peer.withLock(lock, false, async () => 'second holder')).toBeUndefined();
    release();
    expect(await holder).toBe('done');
    expect(await peer.withLock(lock, false, async () => 'second holder')).toBe('second holder');
  });

  it('answers ping', async () => {
    await expect(get().store.ping()).resolves.toBeUndefined();
  });
}
