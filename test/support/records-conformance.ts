// Behavioural suites for the two append-mostly record stores, run against every implementation (Postgres,
// PGlite): the audit trail (AuditStore) and the revocation feed (RevocationStore). Records "as they
// arrive": replays, pagination while events keep coming, sequences under concurrent appends.
import { randomBytes, randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import type { AuditEvent, EventType } from '../../src/domain/audit/events.js';
import type { AuditStore } from '../../src/storage/audit-types.js';
import type { RevocationStore } from '../../src/storage/revocation.js';
import type { Store } from '../../src/storage/types.js';
import { platformInput } from './store-conformance.js';

const DAY_MS = 86_400_000;

export interface RecordsUnderTest {
  audit: AuditStore;
  revocations: RevocationStore;
  /** The records' platforms, agents and grants live in the same database. */
  store: Store;
  /** Two sessions can hold transactions at once (not PGlite). */
  concurrentSessions: boolean;
}

function event(over: Partial<AuditEvent> & { at: number }): AuditEvent {
  return {
    id: randomUUID(),
    type: 'token.issued',
    agentId: null,
    platformId: null,
    kid: null,
    jti: null,
    actor: null,
    clientAddress: '127.0.0.1',
    data: null,
    ...over,
  };
}

export function auditStoreConformance(subject: () => RecordsUnderTest): void {
  it('audit: insert counts new rows only; replaying a batch (stable ids) adds nothing', async () => {
    const { audit } = subject();
    const agentId = randomUUID();
    const now = Date.now();
    const batch = Array.from({ length: 5 }, (_, i) => event({ at: now + i, agentId, jti: randomUUID(), data: { scope: 'orders:read' } }));
    expect(await audit.insert(batch)).toBe(5);
    expect(await audit.insert(batch)).toBe(0);
    expect(await audit.insert([...batch.slice(0, 2), event({ at: now + 9, agentId })])).toBe(1);
    expect(await audit.insert([])).toBe(0);
    const listed = await audit.list({ types: [], agentId, limit: 100 });
    expect(listed).toHaveLength(6);
    expect(listed[0]).toEqual(batch[0]); // every field round-trips
  });

  it('audit: each filter narrows; time bounds are [since, until)', async () => {
    const { audit } = subject();
    const agentId = randomUUID();
    const platformId = randomUUID();
    const t0 = Date.now() - 60_000;
    const types: EventType[] = ['token.issued', 'token.refused', 'listing.served', 'grant.put'];
    await audit.insert(
      types.map((type, i) =>
        event({ at: t0 + i * 1000, type, agentId, platformId: i % 2 === 0 ? platformId : randomUUID(), data: type === 'token.refused' ? { error_code: 'invalid_scope' } : null }),
      ),
    );
    const list = (q: Partial<Parameters<AuditStore['list']>[0]>) => audit.list({ types: [], agentId, limit: 100, ...q }).then((rows) => rows.map((r) => r.type));
    expect(await list({})).toEqual(types);
    expect(await list({ types: ['token.refused', 'grant.put'] })).toEqual(['token.refused', 'grant.put']);
    expect(await list({ platformId })).toEqual(['token.issued', 'listing.served']);
    expect(await list({ since: t0 + 1000, until: t0 + 3000 })).toEqual(['token.refused', 'listing.served']);
    expect(await list({ agentId: randomUUID() })).toEqual([]);
    expect(await list({ limit: 2 })).toEqual(types.slice(0, 2));
  });

  it('audit: cursor pages see every event once, in (at, id) order, even while events keep arriving', async () => {
    const { audit } = subject();
    const agentId = randomUUID();
    const t0 = Date.now() - 10_000;
    // Several events share a millisecond: the id breaks the tie.
    const first = Array.from({ length: 23 }, (_, i) => event({ at: t0 + Math.floor(i / 3), agentId }));
    await audit.insert(first);
    const seen: AuditEvent[] = [];
    let after: { at: number; id: string } | undefined;
    let late: AuditEvent[] = [];
    for (let page = 0; page < 20; page++) {
      const rows = await audit.list({ types: [], agentId, limit: 5, after });
      if (page === 1) {
        late = Array.from({ length: 4 }, (_, i) => event({ at: t0 + 1000 + i, agentId }));
        await audit.insert(late); // newer than the cursor: the reader reaches them
      }
      if (rows.length === 0) break;
      seen.push(...rows);
      after = { at: rows[rows.length - 1].at, id: rows[rows.length - 1].id };
    }
    const key = (e: AuditEvent) => `${String(e.at).padStart(15, '0')}/${e.id}`;
    expect(seen.map((e) => e.id).sort()).toEqual([...first, ...late].map((e) => e.id).sort());
    expect(seen.map(key)).toEqual([...seen].map(key).sort());
  });

  it('audit: maintenance creates the coming days and drops whole days past retention, idempotently', async () => {
    const { audit } = subject();
    // A fixed day far from today, so that other tests' partitions are not concerned.
    const day = Date.UTC(2031, 0, 15);
    const created = await audit.maintain(new Date(day + 3600_000), 30, 2);
    expect(created).toBeDefined();
    expect(created!.created).toEqual(expect.arrayContaining(['audit_events_p20310114', 'audit_events_p20310115', 'audit_events_p20310116', 'audit_events_p20310117']));
    const agentId = randomUUID();
    await audit.insert([event({ at: day + 10, agentId }), event({ at: day + DAY_MS + 10, agentId })]);
    expect(await audit.list({ types: [], agentId, limit: 10 })).toHaveLength(2);
    // Run again 31 days later with the same retention: the 14th and 15th are past it, the 16th is not.
    const later = await audit.maintain(new Date(day + 31 * DAY_MS + 3600_000), 30, 0);
    expect(later!.dropped).toEqual(expect.arrayContaining(['audit_events_p20310114', 'audit_events_p20310115']));
    expect(later!.dropped).not.toContain('audit_events_p20310116');
    expect((await audit.list({ types: [], agentId, limit: 10 })).map((e) => e.at)).toEqual([day + DAY_MS + 10]);
    // Nothing left to do: a second run creates and drops nothing.
    const again = await audit.maintain(new Date(day + 31 * DAY_MS + 3600_000), 30, 0);
    expect(again).toEqual({ created: [], dropped: [], deleted: 0 });
    await audit.ping();
  });
}

export function revocationStoreConformance(subject: () => RecordsUnderTest): void {
  const future = () => new Date(Date.now() + 60_000);

  it('revocations: per-platform sequences start at 1 and grow by one; a key entry goes to every platform', async () => {
    const { revocations, store } = subject();
    const a = await store.createPlatform(platformInput());
    const b = await store.createPlatform(platformInput());
    expect(await revocations.heads([a.id, b.id])).toEqual(new Map([[a.id, 0], [b.id, 0]]));
    const [first] = await revocations.append({ kind: 'platform', platformId: a.id, iatMax: 100 }, future());
    expect(first).toMatchObject({ platformId: a.id, seq: 1, kind: 'platform', iatMax: 100, agentId: null, kid: null });
    const agentId = randomUUID();
    const both = await revocations.append({ kind: 'agent', agentId, platformIds: [b.id, a.id, a.id], iatMax: 200 }, future());
    expect(both.map((e) => [e.platformId, e.seq]).sort()).toEqual([[a.id, 2], [b.id, 1]].sort());
    const keyEntries = await revocations.append({ kind: 'key', kid: 'kid-1' }, future());
    expect(keyEntries.filter((e) => e.platformId === a.id || e.platformId === b.id).map((e) => [e.platformId, e.seq]).sort()).toEqual([[a.id, 3], [b.id, 2]].sort());
    expect(keyEntries.every((e) => e.kind === 'key' && e.kid === 'kid-1' && e.iatMax === null)).toBe(true);
    expect(await revocations.append({ kind: 'agent', agentId, platformIds: [], iatMax: 1 }, future())).toEqual([]);
    const unknown = randomUUID();
    expect(await revocations.heads([a.id, b.id, unknown])).toEqual(new Map([[a.id, 3], [b.id, 2], [unknown, 0]]));
  });

  it('revocations: since() returns the live entries after a sequence, in order, with the head', async () => {
    const { revocations, store } = subject();
    const p = await store.createPlatform(platformInput());
    const now = new Date();
    await revocations.append({ kind: 'platform', platformId: p.id, iatMax: 1 }, new Date(now.getTime() + 60_000));
    await revocations.append({ kind: 'agent', agentId: randomUUID(), platformIds: [p.id], iatMax: 2 }, new Date(now.getTime() + 1_000)); // expires first
    await revocations.append({ kind: 'platform', platformId: p.id, iatMax: 3 }, new Date(now.getTime() + 60_000));
    const all = await revocations.since(p.id, 0, now);
    expect(all.head).toBe(3);
    expect(all.entries.map((e) => e.seq)).toEqual([1, 2, 3]);
    expect((await revocations.since(p.id, 1, now)).entries.map((e) => e.iatMax)).toEqual([2, 3]);
    expect(await revocations.since(p.id, 3, now)).toEqual({ head: 3, entries: [] });
    // Later, the short-lived entry is gone from the answer; the head stays.
    const later = new Date(now.getTime() + 2_000);
    expect((await revocations.since(p.id, 0, later)).entries.map((e) => e.seq)).toEqual([1, 3]);
    expect(await revocations.since(randomUUID(), 0, now)).toEqual({ head: 0, entries: [] });
  });

  it('revocations: purgeExpired removes only expired entries and never moves a head back', async () => {
    const { revocations, store } = subject();
    const p = await store.createPlatform(platformInput());
    const now = Date.now();
    await revocations.append({ kind: 'platform', platformId: p.id, iatMax: 1 }, new Date(now + 1_000));
    await revocations.append({ kind: 'platform', platformId: p.id, iatMax: 2 }, new Date(now + 600_000));
    await revocations.purgeExpired(new Date(now + 2_000));
    expect((await revocations.since(p.id, 0, new Date(now))).entries.map((e) => e.seq)).toEqual([2]);
    expect((await revocations.heads([p.id])).get(p.id)).toBe(2);
    const [next] = await revocations.append({ kind: 'platform', platformId: p.id, iatMax: 3 }, future());
    expect(next.seq).toBe(3);
  });

  it('revocations: concurrent appends to one platform get distinct, gap-free sequences', async () => {
    const { revocations, store, concurrentSessions } = subject();
    const p = await store.createPlatform(platformInput());
    const n = concurrentSessions ? 20 : 8;
    const results = await Promise.all(
      Array.from({ length: n }, (_, i) => revocations.append({ kind: 'agent', agentId: randomUUID(), platformIds: [p.id], iatMax: i }, future())),
    );
    expect(results.map(([e]) => e.seq).sort((x, y) => x - y)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    expect((await revocations.heads([p.id])).get(p.id)).toBe(n);
  });

  it('revocations: who holds dropped scopes, and which platforms exist', async () => {
    const { revocations, store } = subject();
    const p = await store.createPlatform(platformInput());
    const reader = await store.createAgent({ name: 'r', apiKeyId: `ak_${randomBytes(8).toString('hex')}`, secretHash: '$h$r' });
    const writer = await store.createAgent({ name: 'w', apiKeyId: `ak_${randomBytes(8).toString('hex')}`, secretHash: '$h$w' });
    await store.putGrant(reader.id, p.id, ['orders:read']);
    await store.putGrant(writer.id, p.id, ['orders:read', 'orders:write']);
    expect(await revocations.agentsHoldingScopes(p.id, ['orders:write'])).toEqual([writer.id]);
    expect((await revocations.agentsHoldingScopes(p.id, ['orders:read'])).sort()).toEqual([reader.id, writer.id].sort());
    expect(await revocations.agentsHoldingScopes(p.id, [])).toEqual([]);
    expect(await revocations.platformExists(p.id)).toBe(true);
    expect(await revocations.platformExists(randomUUID())).toBe(false);
  });
}
