// One behavioural suite for the feed credentials' storage (FeedCredentialStore and FeedCredentialWrites),
// run against Postgres, PGlite and the memory adapter. Platforms are made through the unit of work of the
// same database; each test makes its own and reads only their credentials.
import { randomBytes, randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import type { FeedCredentialRecord, FeedCredentialStore, FeedCredentialWrites } from '../../src/core/ports/feed-credentials.js';
import type { UnitOfWork } from '../../src/core/ports/unit-of-work.js';
import { platformInput, writeThrough } from './store-conformance.js';

export interface FeedCredentialStoreUnderTest {
  reads: FeedCredentialStore;
  /** Writes the credentials (`tx.feedCredentials`) and the platforms of the same database. */
  uow: UnitOfWork;
}

/** The unit of work's feed-credential writes, each call in a unit of its own. */
const writesThrough = (uow: UnitOfWork): FeedCredentialWrites => ({
  insertFeedCredential: (row) => uow.run((tx) => tx.feedCredentials.insertFeedCredential(row)),
  deleteFeedCredential: (platformId, id) => uow.run((tx) => tx.feedCredentials.deleteFeedCredential(platformId, id)),
  listFeedCredentials: (platformId) => uow.run((tx) => tx.feedCredentials.listFeedCredentials(platformId)),
});

const row = (platformId: string, createdAt = new Date()): FeedCredentialRecord => ({
  id: randomUUID(),
  platformId,
  createdAt: new Date(Math.floor(createdAt.getTime())),
  tokenHash: randomBytes(32).toString('hex'),
});

export function feedCredentialStoreConformance(get: () => FeedCredentialStoreUnderTest): void {
  const newPlatform = async () => (await writeThrough(get().uow)((w) => w.createPlatform(platformInput({ routes: [] })))).id;

  it('inserts, lists oldest first without the hash, reads the hashes of one platform and of all', async () => {
    const { reads, uow } = get();
    const writes = writesThrough(uow);
    const [p, q] = [await newPlatform(), await newPlatform()];
    const older = row(p, new Date(Date.now() - 60_000));
    const newer = row(p);
    const elsewhere = row(q);
    for (const r of [newer, older, elsewhere]) await writes.insertFeedCredential(r);
    expect(await reads.listFeedCredentials(p)).toEqual([older, newer].map(({ id, platformId, createdAt }) => ({ id, platformId, createdAt })));
    expect(await writes.listFeedCredentials(p)).toEqual(await reads.listFeedCredentials(p));
    const sortById = (rows: FeedCredentialRecord[]) => [...rows].sort((x, y) => x.id.localeCompare(y.id));
    expect(sortById(await reads.feedCredentialsOf(p))).toEqual(sortById([older, newer]));
    const all = await reads.allFeedCredentials();
    for (const r of [older, newer, elsewhere]) expect(all).toContainEqual(r);
  });

  it('deletes only a credential of the named platform', async () => {
    const { reads, uow } = get();
    const writes = writesThrough(uow);
    const [p, q] = [await newPlatform(), await newPlatform()];
    const mine = row(p);
    await writes.insertFeedCredential(mine);
    expect(await writes.deleteFeedCredential(q, mine.id)).toBe(false);
    expect(await writes.deleteFeedCredential(p, randomUUID())).toBe(false);
    expect(await writes.deleteFeedCredential(p, mine.id)).toBe(true);
    expect(await writes.deleteFeedCredential(p, mine.id)).toBe(false);
    expect(await reads.feedCredentialsOf(p)).toEqual([]);
  });

  it('refuses a credential of an unknown platform and a hash stored twice', async () => {
    const writes = writesThrough(get().uow);
    await expect(writes.insertFeedCredential(row(randomUUID()))).rejects.toThrow();
    const p = await newPlatform();
    const first = row(p);
    await writes.insertFeedCredential(first);
    await expect(writes.insertFeedCredential({ ...row(p), tokenHash: first.tokenHash })).rejects.toThrow();
  });
}
