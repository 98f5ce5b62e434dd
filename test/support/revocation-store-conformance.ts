// One behavioural suite for the RevocationStore interface (the revocation feed's storage), run against
// Postgres, PGlite and the memory adapter. Platforms, agents and grants are made through the unit of work
// of the same records; each test makes its own, and reads only their feeds (a key entry goes to every platform of the database).
import { randomBytes, randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import type { RevocationEntry, RevocationStore, RevocationTarget } from '../../src/core/ports/revocation-log.js';
import type { AdminWrites, UnitOfWork } from '../../src/core/ports/unit-of-work.js';
import { platformInput, writeThrough } from './store-conformance.js';

export interface RevocationStoreUnderTest {
  revocations: RevocationStore;
  /** Writes the platforms, agents and grants of the same database. */
  uow: UnitOfWork;
}

const HOUR_MS = 3_600_000;
const inAnHour = () => new Date(Date.now() + HOUR_MS);
const seqs = (entries: RevocationEntry[]) => entries.map((e) => e.seq);

export function revocationStoreConformance(get: () => RevocationStoreUnderTest): void {
  const write = <T>(fn: (writes: AdminWrites) => Promise<T>) => writeThrough(get().uow)(fn);
  /** Entries are appended as the service appends them: in a unit of work (each here in one of its own). */
  const append = (target: RevocationTarget, expiresAt: Date) => get().uow.run((tx) => tx.revocationLog.append(target, expiresAt));
  const newPlatform = async () => (await write((w) => w.createPlatform(platformInput({ routes: [] })))).id;
  const newAgent = async () =>
    (await write((w) => w.createAgent({ name: `agent ${randomBytes(3).toString('hex')}`, apiKeyId: `ak_${randomBytes(8).toString('hex')}`, secretHash: `$hash$${randomUUID()}` }))).id;

  it('appends an agent entry to each of its platforms, once per platform, each with the next sequence', async () => {
    const { revocations } = get();
    const [a, b] = [await newPlatform(), await newPlatform()];
    const agentId = await newAgent();
    const expiresAt = inAnHour();
    const entries = await append({ kind: 'agent', agentId, platformIds: [b, a, b], iatMax: 1_700_000_000 }, expiresAt);
    expect(entries.sort((x, y) => (x.platformId < y.platformId ? -1 : 1))).toEqual(
      [a, b].sort().map((platformId) => ({
        platformId,
        seq: 1,
        kind: 'agent',
        agentId,
        kid: null,
        iatMax: 1_700_000_000,
        createdAt: expect.any(Date),
        expiresAt,
      })),
    );
    const next = await append({ kind: 'agent', agentId, platformIds: [a], iatMax: 1_700_000_100 }, expiresAt);
    expect(next.map((e) => [e.platformId, e.seq])).toEqual([[a, 2]]);
    expect(seqs((await revocations.since(a, 0, new Date())).entries)).toEqual([1, 2]);
    // Nothing to append to: no platform, or one that does not exist.
    expect(await append({ kind: 'agent', agentId, platformIds: [], iatMax: 1 }, expiresAt)).toEqual([]);
    expect(await append({ kind: 'agent', agentId, platformIds: [randomUUID()], iatMax: 1 }, expiresAt)).toEqual([]);
  });

  it('appends a platform entry to that platform only', async () => {
    const { revocations } = get();
    const [a, b] = [await newPlatform(), await newPlatform()];
    const expiresAt = inAnHour();
    expect(await append({ kind: 'platform', platformId: a, iatMax: 42 }, expiresAt)).toEqual([
      { platformId: a, seq: 1, kind: 'platform', agentId: null, kid: null, iatMax: 42, createdAt: expect.any(Date), expiresAt },
    ]);
    expect((await revocations.heads([a, b])).get(b)).toBe(0);
  });

  it('appends a key entry to the feed of every platform, each at its own next sequence', async () => {
    const { revocations } = get();
    const [a, b] = [await newPlatform(), await newPlatform()];
    await append({ kind: 'platform', platformId: a, iatMax: 1 }, inAnHour());
    const expiresAt = inAnHour();
    const entries = await append({ kind: 'key', kid: 'kid-retired' }, expiresAt);
    const byPlatform = new Map(entries.map((e) => [e.platformId, e]));
    expect(byPlatform.size).toBe(entries.length);
    expect(byPlatform.get(a)).toEqual({ platformId: a, seq: 2, kind: 'key', agentId: null, kid: 'kid-retired', iatMax: null, createdAt: expect.any(Date), expiresAt });
    expect(byPlatform.get(b)).toMatchObject({ seq: 1, kind: 'key', kid: 'kid-retired' });
    // Every platform of the database got one, and its head moved to that entry.
    const heads = await revocations.heads([...byPlatform.keys()]);
    for (const entry of entries) expect(heads.get(entry.platformId)).toBe(entry.seq);
  });

  it('since(n) returns the live entries after n in order, with the head', async () => {
    const { revocations } = get();
    const [a, other] = [await newPlatform(), await newPlatform()];
    const agentId = await newAgent();
    for (let i = 1; i <= 5; i++) await append({ kind: 'agent', agentId, platformIds: [a], iatMax: i }, inAnHour());
    await append({ kind: 'platform', platformId: other, iatMax: 1 }, inAnHour());
    const now = new Date();

    const all = await revocations.since(a, 0, now);
    expect(all.head).toBe(5);
    expect(seqs(all.entries)).toEqual([1, 2, 3, 4, 5]);
    expect(all.entries.map((e) => e.iatMax)).toEqual([1, 2, 3, 4, 5]);
    expect(all.entries.every((e) => e.platformId === a)).toBe(true);
    expect(await revocations.since(a, 3, now)).toEqual({ head: 5, entries: all.entries.slice(3) });
    expect(await revocations.since(a, 5, now)).toEqual({ head: 5, entries: [] });
    // A reader ahead of the feed (another database, a restore) gets the head to resync from.
    expect(await revocations.since(a, 99, now)).toEqual({ head: 5, entries: [] });
    expect(await revocations.since(await newPlatform(), 0, now)).toEqual({ head: 0, entries: [] });
    expect(await revocations.since(randomUUID(), 0, now)).toEqual({ head: 0, entries: [] });
  });

  it('since() leaves out entries expired at `now`, but the head still counts them', async () => {
    const { revocations } = get();
    const a = await newPlatform();
    const now = new Date();
    await append({ kind: 'platform', platformId: a, iatMax: 1 }, new Date(now.getTime() - 1000));
    await append({ kind: 'platform', platformId: a, iatMax: 2 }, now);
    await append({ kind: 'platform', platformId: a, iatMax: 3 }, new Date(now.getTime() + 1000));
    const { head, entries } = await revocations.since(a, 0, now);
    expect(head).toBe(3);
    expect(seqs(entries)).toEqual([3]);
    expect(seqs((await revocations.since(a, 0, new Date(now.getTime() - 2000))).entries)).toEqual([1, 2, 3]);
  });

  it('heads() answers for every platform asked, 0 for one without entries or unknown', async () => {
    const { revocations } = get();
    const [a, b, quiet] = [await newPlatform(), await newPlatform(), await newPlatform()];
    const unknown = randomUUID();
    const agentId = await newAgent();
    await append({ kind: 'agent', agentId, platformIds: [a, b], iatMax: 1 }, inAnHour());
    await append({ kind: 'platform', platformId: a, iatMax: 2 }, inAnHour());
    expect(await revocations.heads([a, b, quiet, unknown])).toEqual(
      new Map([
        [a, 2],
        [b, 1],
        [quiet, 0],
        [unknown, 0],
      ]),
    );
    expect(await revocations.heads([])).toEqual(new Map());
  });

  it('purgeExpired removes only expired entries, returns the live count, and never reuses a sequence', async () => {
    const { revocations } = get();
    const a = await newPlatform();
    const now = new Date();
    await append({ kind: 'platform', platformId: a, iatMax: 1 }, new Date(now.getTime() - 1000));
    await append({ kind: 'platform', platformId: a, iatMax: 2 }, now);
    await append({ kind: 'platform', platformId: a, iatMax: 3 }, new Date(now.getTime() + HOUR_MS));

    const live = await revocations.purgeExpired(now);
    expect(live).toBeGreaterThanOrEqual(1);
    // Read as of long ago, so that only the purge (not the expiry filter) decides what is left.
    const longAgo = new Date(0);
    expect(seqs((await revocations.since(a, 0, longAgo)).entries)).toEqual([3]);
    expect(await revocations.purgeExpired(now)).toBe(live);
    expect((await revocations.heads([a])).get(a)).toBe(3);
    const [next] = await append({ kind: 'platform', platformId: a, iatMax: 4 }, inAnHour());
    expect(next.seq).toBe(4);
    expect(await revocations.purgeExpired(now)).toBe(live + 1);
  });

  it('agentsHoldingScopes names the agents whose grant on the platform holds any of the scopes', async () => {
    const { revocations } = get();
    const [platform, elsewhere] = [await newPlatform(), await newPlatform()];
    const [reader, writer, both, other] = [await newAgent(), await newAgent(), await newAgent(), await newAgent()];
    await write(async (w) => {
      await w.putGrant(reader, platform, ['orders:read']);
      await w.putGrant(writer, platform, ['orders:write']);
      await w.putGrant(both, platform, ['orders:read', 'orders:write']);
      await w.putGrant(other, elsewhere, ['orders:write']);
    });
    expect((await revocations.agentsHoldingScopes(platform, ['orders:write'])).sort()).toEqual([writer, both].sort());
    expect((await revocations.agentsHoldingScopes(platform, ['orders:read', 'orders:write'])).sort()).toEqual([reader, writer, both].sort());
    expect(await revocations.agentsHoldingScopes(platform, ['orders:delete'])).toEqual([]);
    expect(await revocations.agentsHoldingScopes(platform, [])).toEqual([]);
    expect(await revocations.agentsHoldingScopes(randomUUID(), ['orders:write'])).toEqual([]);
  });

  it('platformExists knows the platforms of the database', async () => {
    const { revocations } = get();
    expect(await revocations.platformExists(await newPlatform())).toBe(true);
    expect(await revocations.platformExists(randomUUID())).toBe(false);
  });

  it('concurrent appends to one platform get distinct, gap-free sequences; readers see them in order', async () => {
    const { revocations } = get();
    const a = await newPlatform();
    const agentId = await newAgent();
    const appended = await Promise.all(
      Array.from({ length: 20 }, (_, i) => append({ kind: 'agent', agentId, platformIds: [a], iatMax: i }, inAnHour())),
    );
    const assigned = appended.flat().map((e) => e.seq).sort((x, y) => x - y);
    expect(assigned).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    const { head, entries } = await revocations.since(a, 0, new Date());
    expect(head).toBe(20);
    expect(seqs(entries)).toEqual(assigned);
  });

  it('a reader resuming from the head while writers append misses no entry (sequence order is commit order)', async () => {
    const { revocations } = get();
    const a = await newPlatform();
    const total = 30;
    let writing = true;
    const writers = Promise.all(
      Array.from({ length: total }, (_, i) => append({ kind: 'platform', platformId: a, iatMax: i }, inAnHour())),
    ).finally(() => {
      writing = false;
    });
    const read: number[] = [];
    let cursor = 0;
    // One more read after the writers are done picks up the last of them.
    for (let more = true; more; ) {
      more = writing;
      const { head, entries } = await revocations.since(a, cursor, new Date());
      read.push(...seqs(entries));
      cursor = head;
    }
    await writers;
    expect(read).toEqual(Array.from({ length: total }, (_, i) => i + 1));
  });

  it('concurrent appends across the same platforms, listed in either order, do not deadlock and stay gap-free', async () => {
    const { revocations } = get();
    const [a, b] = [await newPlatform(), await newPlatform()];
    const agentId = await newAgent();
    const appended = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        i % 4 === 3
          ? append({ kind: 'platform', platformId: i % 8 === 3 ? a : b, iatMax: i }, inAnHour())
          : append({ kind: 'agent', agentId, platformIds: i % 2 ? [a, b] : [b, a], iatMax: i }, inAnHour()),
      ),
    );
    for (const platform of [a, b]) {
      const assigned = appended
        .flat()
        .filter((e) => e.platformId === platform)
        .map((e) => e.seq)
        .sort((x, y) => x - y);
      expect(assigned).toEqual(Array.from({ length: assigned.length }, (_, i) => i + 1));
      expect((await revocations.heads([platform])).get(platform)).toBe(assigned.length);
    }
  });
}
