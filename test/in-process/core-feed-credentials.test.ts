// Feed credentials in process, on the memory ports: each change one unit of work with its
// audit event (and nothing when it fails), only the token's hash stored, at most 10 per platform, and the
// check answered from memory: no store read per request, whatever the token or the platform id; a change
// (here, or heard on the bus from another instance) reloads the platform and tells the listeners.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { randomBytes, randomUUID } from 'node:crypto';
import { StoreUnavailableError } from '../../src/core/errors.js';
import { FeedCredentialService, hashFeedToken, MAX_PER_PLATFORM } from '../../src/core/revocation/feed-credential-service.js';
import type { FeedCredentialStore } from '../../src/core/ports/feed-credentials.js';
import { BY as by, memoryCore, type MemoryCore } from '../support/memory/core.js';

let core: MemoryCore;

beforeEach(async () => {
  core = await memoryCore();
});
afterEach(() => core.stop());

const platform = () => core.platforms.create({ name: 'P', scopes: [{ name: 'read' }] }, by);
const randomToken = () => `acef_${randomBytes(32).toString('base64url')}`;

/** The memory store behind the service, counting its reads. */
function countingStore(inner: FeedCredentialStore) {
  const reads = { all: 0, one: 0, list: 0 };
  const store: FeedCredentialStore = {
    allFeedCredentials: () => (reads.all++, inner.allFeedCredentials()),
    feedCredentialsOf: (id) => (reads.one++, inner.feedCredentialsOf(id)),
    listFeedCredentials: (id) => (reads.list++, inner.listFeedCredentials(id)),
  };
  return { store, reads };
}

describe('feed credentials (core)', () => {
  it('create stores only the hash, with one audit event; delete removes it with its event; list shows no token', async () => {
    const p = await platform();
    const { credential, token } = await core.feedCredentials.create(p.id, by);
    expect(token).toMatch(/^acef_[A-Za-z0-9_-]{43}$/);
    const stored = [...core.memoryUow.feedCredentials.rows.values()];
    expect(stored).toEqual([{ id: credential.id, platformId: p.id, createdAt: credential.createdAt, tokenHash: hashFeedToken(token) }]);
    expect(JSON.stringify(stored)).not.toContain(token);
    expect(await core.feedCredentials.list(p.id)).toEqual([{ id: credential.id, platformId: p.id, createdAt: credential.createdAt }]);
    await core.feedCredentials.delete(p.id, credential.id, by);
    expect(await core.feedCredentials.list(p.id)).toEqual([]);
    const events = core.audit.events.filter((e) => e.type.startsWith('feed_credential.'));
    expect(events.map((e) => [e.type, e.platformId, e.data?.feed_credential_id])).toEqual([
      ['feed_credential.created', p.id, credential.id],
      ['feed_credential.deleted', p.id, credential.id],
    ]);
    expect(JSON.stringify(core.audit.events)).not.toContain(token);
  });

  it('an unknown platform or credential is a 404; the 11th credential a 409; a failed event insert leaves nothing', async () => {
    const p = await platform();
    await expect(core.feedCredentials.create(randomUUID(), by)).rejects.toMatchObject({ code: 'not_found' });
    await expect(core.feedCredentials.delete(p.id, randomUUID(), by)).rejects.toMatchObject({ code: 'not_found' });
    for (let i = 0; i < MAX_PER_PLATFORM; i++) await core.feedCredentials.create(p.id, by);
    await expect(core.feedCredentials.create(p.id, by)).rejects.toMatchObject({ code: 'conflict' });
    const other = await platform();
    core.memoryUow.faults.auditInsert = true;
    await expect(core.feedCredentials.create(other.id, by)).rejects.toBeInstanceOf(StoreUnavailableError);
    core.memoryUow.faults.auditInsert = false;
    expect(await core.feedCredentials.list(other.id)).toEqual([]);
  });

  it('verifies from memory: right token, wrong token, another platform, unknown platform; no store read per request', async () => {
    const [p, q] = [await platform(), await platform()];
    const { store, reads } = countingStore(core.memoryUow.feedCredentials);
    const service = new FeedCredentialService({ store, uow: core.uow, bus: core.bus });
    const mine = await service.create(p.id, by);
    const theirs = await service.create(q.id, by);
    expect(await service.verify(p.id, mine.token)).toBe(mine.credential.id);
    const before = { ...reads };
    for (let i = 0; i < 500; i++) {
      expect(await service.verify(p.id, randomToken())).toBeUndefined();
      expect(await service.verify(randomUUID(), randomToken())).toBeUndefined();
      expect(service.verifyNow(randomUUID(), mine.token)).toBeNull();
    }
    expect(await service.verify(p.id, theirs.token)).toBeUndefined();
    expect(await service.verify(p.id, 'not a feed token')).toBeUndefined();
    expect(service.verifyNow(p.id, mine.token)).toBe(mine.credential.id);
    expect(reads).toEqual(before);
  });

  it('a change heard on the bus (another instance) reloads that platform: a deleted credential is refused, listeners told', async () => {
    const p = await platform();
    const here = core.feedCredentials;
    // A second instance: its own service over the same store and bus.
    const there = new FeedCredentialService({ store: core.memoryUow.feedCredentials, uow: core.uow, bus: core.bus });
    const changed: (string | undefined)[] = [];
    there.onChange((id) => changed.push(id));
    const { credential, token } = await here.create(p.id, by);
    expect(await there.verify(p.id, token)).toBe(credential.id);
    expect(there.isLive(p.id, credential.id)).toBe(true);
    expect(there.hasCredentials(p.id)).toBe(true);
    await here.delete(p.id, credential.id, by);
    expect(await there.verify(p.id, token)).toBeUndefined();
    expect(there.isLive(p.id, credential.id)).toBe(false);
    // Its last credential gone: the feed releases what it kept for the platform.
    expect(there.hasCredentials(p.id)).toBe(false);
    expect(changed).toContain(p.id);
  });

  it('a reload that fails is a 503 (StoreUnavailableError), not a stale acceptance', async () => {
    const p = await platform();
    const { credential, token } = await core.feedCredentials.create(p.id, by);
    expect(await core.feedCredentials.verify(p.id, token)).toBe(credential.id);
    core.memory.down = true;
    await core.bus.publish({ kind: 'feed_credentials', platformId: p.id });
    expect(core.feedCredentials.verifyNow(p.id, token)).toBeUndefined();
    await expect(core.feedCredentials.verify(p.id, token)).rejects.toBeInstanceOf(StoreUnavailableError);
    core.memory.down = false;
  });
});
