// One behavioural suite for the AuditStore interface (the audit trail's storage), run against Postgres and
// PGlite. The suites share one database per implementation, so every test reads through its own agent,
// platform or time window, and partition maintenance works in 2001, far from every other test's events.
import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { ADMIN_ACTOR, auditEvents, type AuditEvent } from '../../src/core/audit/events.js';
import type { AuditStore, EventQuery } from '../../src/core/ports/audit-store.js';

export interface AuditStoreUnderTest {
  store: AuditStore;
  /** Another store on the same database with its own connections: it can be closed, or run alongside. */
  open(): AuditStore;
  /**
   * Runs `during` while another session holds the maintenance lock; absent where the database has one
   * session only (PGlite: the holder would block every other statement).
   */
  holdMaintenanceLock?: (during: () => Promise<void>) => Promise<void>;
}

const DAY_MS = 86_400_000;
const CLIENT = '192.0.2.10';

/** A window of time no other test writes in (the trail table is shared by the whole suite). */
let windows = 0;
const freshWindow = () => Date.UTC(2031, 0, 1) + windows++ * DAY_MS;

/** One event of each shape the service writes, for one agent and platform, at `at`. */
function eventsAt(at: number[], agentId: string, platformId: string): AuditEvent[] {
  const builders = [
    () =>
      auditEvents.tokenIssued({
        jti: randomUUID(),
        agentId,
        platformId,
        scope: 'orders:read',
        kid: 'k1',
        clientAddress: CLIENT,
        by: { method: 'private_key_jwt', apiKeyId: 'ak_0123', clientKid: 'client-key-1', assertionJti: 'a-jti' },
      }),
    // A claimed subject with a bidi control and a lone surrogate: the builder's cleaning keeps it storable.
    () =>
      auditEvents.tokenRefused({
        errorCode: 'invalid_scope',
        agentId,
        platformId,
        clientAddress: CLIENT,
        by: { method: 'workload', issuer: 'https://issuer.example', subject: 'system:serviceaccount:ns:sa\u202e\ud800', assertionJti: 'w-jti' },
      }),
    () => auditEvents.listingServed({ agentId, clientAddress: CLIENT }),
    () => auditEvents.adminChange('grant.put', { actor: ADMIN_ACTOR, clientAddress: CLIENT, agentId, platformId, scopes: ['orders:read'] }),
    () => auditEvents.adminChange('agent.updated', { actor: ADMIN_ACTOR, clientAddress: CLIENT, agentId, fields: ['status', 'name'], status: 'inactive' }),
  ];
  return at.map((t, i) => ({ ...builders[i % builders.length](), at: t }));
}

/** Sorted as the store promises: by time, then by id. */
const inOrder = (events: AuditEvent[]) => [...events].sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

const query = (over: Partial<EventQuery>): EventQuery => ({ types: [], limit: 1000, ...over });

export function auditStoreConformance(get: () => AuditStoreUnderTest): void {
  it('inserts a batch and reads every field back as written', async () => {
    const { store } = get();
    const base = freshWindow();
    const agentId = randomUUID();
    const events = eventsAt([base, base + 1, base + 2, base + 3, base + 4], agentId, randomUUID());
    expect(await store.insert(events)).toBe(5);
    expect(await store.list(query({ agentId }))).toEqual(inOrder(events));
    expect(await store.insert([])).toBe(0);
  });

  it('keeps text as written: quotes, backslashes, JSON-like and non-ASCII characters', async () => {
    const { store } = get();
    const at = freshWindow();
    // The batch travels as one JSON document: nothing in a field may break out of it or be unescaped.
    const odd = auditEvents.adminAuthFailed({ clientAddress: CLIENT, method: 'GET', path: `/admin/"a"\\b'c/%22}]},{"x":1/é✓😀` });
    const changed = auditEvents.adminChange('key.rotated', { actor: `ad"min\\`, clientAddress: CLIENT, kid: `k"1\\n\n` });
    const events = [
      { ...odd, at },
      { ...changed, at: at + 1 },
    ];
    expect(await store.insert(events)).toBe(2);
    expect(await store.list(query({ since: at, until: at + 2 }))).toEqual(inOrder(events));
  });

  it('is idempotent on (at, id): a replayed batch adds nothing, a mixed one only its new events', async () => {
    const { store } = get();
    const base = freshWindow();
    const agentId = randomUUID();
    const events = eventsAt([base, base + 10, base + 20], agentId, randomUUID());
    expect(await store.insert(events)).toBe(3);
    expect(await store.insert(events)).toBe(0);
    const [extra] = eventsAt([base + 30], agentId, randomUUID());
    expect(await store.insert([events[0], extra, events[2]])).toBe(1);
    const listed = await store.list(query({ agentId }));
    expect(listed.map((e) => e.id)).toEqual(inOrder([...events, extra]).map((e) => e.id));
  });

  it('filters by type, agent and platform', async () => {
    const { store } = get();
    const base = freshWindow();
    const [agentA, agentB, platformA, platformB] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    const events = [
      ...eventsAt([base, base + 1, base + 2, base + 3, base + 4], agentA, platformA),
      ...eventsAt([base + 5, base + 6, base + 7, base + 8, base + 9], agentB, platformB),
    ];
    await store.insert(events);
    const window = { since: base, until: base + DAY_MS };
    const ids = (list: AuditEvent[]) => list.map((e) => e.id);

    expect(ids(await store.list(query(window)))).toEqual(ids(inOrder(events)));
    expect(ids(await store.list(query({ ...window, types: ['token.issued'] })))).toEqual(ids(events.filter((e) => e.type === 'token.issued')));
    expect(ids(await store.list(query({ ...window, types: ['token.refused', 'grant.put'] })))).toEqual(
      ids(events.filter((e) => e.type === 'token.refused' || e.type === 'grant.put')),
    );
    expect(ids(await store.list(query({ agentId: agentB })))).toEqual(ids(events.filter((e) => e.agentId === agentB)));
    // Events without a platform (listing.served, agent.updated) are not on any platform's list.
    expect(ids(await store.list(query({ platformId: platformA })))).toEqual(ids(events.filter((e) => e.platformId === platformA)));
    expect(ids(await store.list(query({ agentId: agentA, platformId: platformB })))).toEqual([]);
    expect(ids(await store.list(query({ agentId: agentA, types: ['admin.auth_failed'] })))).toEqual([]);
  });

  it('reads a time range with since inclusive and until exclusive, at most `limit` rows, oldest first', async () => {
    const { store } = get();
    const base = freshWindow();
    const agentId = randomUUID();
    // Out of order on purpose: the store sorts, not the writer.
    const events = eventsAt([base + 3000, base, base + 2000, base + 1000, base + 4000], agentId, randomUUID());
    await store.insert(events);
    const at = async (q: Partial<EventQuery>) => (await store.list(query({ agentId, ...q }))).map((e) => e.at - base);

    expect(await at({})).toEqual([0, 1000, 2000, 3000, 4000]);
    expect(await at({ since: base + 1000, until: base + 3000 })).toEqual([1000, 2000]);
    expect(await at({ since: base + 1001 })).toEqual([2000, 3000, 4000]);
    expect(await at({ until: base + 1 })).toEqual([0]);
    expect(await at({ since: base + 4001 })).toEqual([]);
    expect(await at({ limit: 2 })).toEqual([0, 1000]);
  });

  it('pages with the (at, id) cursor without gaps or repeats, also through events that share a time', async () => {
    const { store } = get();
    const base = freshWindow();
    const agentId = randomUUID();
    // Four instants, several events each: a page boundary falls between events of the same millisecond.
    const times = [0, 0, 0, 5, 5, 7, 7, 7, 7, 9, 9].map((t) => base + t);
    const events = eventsAt(times, agentId, randomUUID());
    await store.insert(events);

    const seen: AuditEvent[] = [];
    let after: EventQuery['after'];
    for (let page = 0; page < 20; page++) {
      const rows = await store.list(query({ agentId, limit: 3, after }));
      seen.push(...rows);
      if (rows.length < 3) break;
      const last = rows[rows.length - 1];
      after = { at: last.at, id: last.id };
    }
    expect(seen.map((e) => e.id)).toEqual(inOrder(events).map((e) => e.id));
    expect(new Set(seen.map((e) => e.id)).size).toBe(events.length);
  });

  it('maintenance creates daily partitions ahead, keeps events through them and drops whole days past retention', async () => {
    const { store } = get();
    const day = (iso: string) => Date.parse(`${iso}Z`);
    const agentId = randomUUID();
    const platformId = randomUUID();
    const [tooOld, yesterday, today] = eventsAt([day('2001-03-01T08:00'), day('2001-03-09T10:00'), day('2001-03-10T11:00')], agentId, platformId);
    // Written before any partition of 2001 exists: they sit in the default partition.
    expect(await store.insert([tooOld, yesterday, today])).toBe(3);
    const window = { since: day('2001-01-01T00:00'), until: day('2002-01-01T00:00'), agentId };

    // Retention 3 days at 2001-03-10T12:00: the cutoff is 2001-03-07T12:00.
    const first = await store.maintain(new Date(day('2001-03-10T12:00')), 3, 2);
    expect(first).toEqual({
      created: ['audit_events_p20010309', 'audit_events_p20010310', 'audit_events_p20010311', 'audit_events_p20010312'],
      dropped: [],
      deleted: 1,
    });
    // Yesterday's event moved from the default partition into its day; the one past retention is gone.
    expect(await store.list(query(window))).toEqual([yesterday, today]);
    expect(await store.maintain(new Date(day('2001-03-10T12:00')), 3, 2)).toEqual({ created: [], dropped: [], deleted: 0 });

    const [lateOnThe11th] = eventsAt([day('2001-03-11T06:00')], agentId, platformId);
    expect(await store.insert([lateOnThe11th])).toBe(1);
    // Four days later the cutoff is 2001-03-11T12:00: the 9th and 10th end before it and are dropped whole;
    // the 11th ends after it and stays whole, with its event from before the cutoff.
    const later = await store.maintain(new Date(day('2001-03-14T12:00')), 3, 2);
    expect({ ...later, dropped: [...(later?.dropped ?? [])].sort() }).toEqual({
      created: ['audit_events_p20010313', 'audit_events_p20010314', 'audit_events_p20010315', 'audit_events_p20010316'],
      dropped: ['audit_events_p20010309', 'audit_events_p20010310'],
      deleted: 0,
    });
    expect(await store.list(query(window))).toEqual([lateOnThe11th]);

    // New events of a maintained day land in its partition and read back like any other.
    const [onThe14th] = eventsAt([day('2001-03-14T13:00')], agentId, platformId);
    expect(await store.insert([onThe14th])).toBe(1);
    expect(await store.insert([onThe14th])).toBe(0);
    expect(await store.list(query(window))).toEqual([lateOnThe11th, onThe14th]);
  });

  it('maintenance returns at once, doing nothing, while another replica holds its lock', async (context) => {
    const { store, holdMaintenanceLock } = get();
    if (!holdMaintenanceLock) return context.skip();
    await holdMaintenanceLock(async () => {
      expect(await store.maintain(new Date(Date.parse('2001-06-10T12:00Z')), 3, 2)).toBeUndefined();
    });
    const after = await store.maintain(new Date(Date.parse('2001-06-10T12:00Z')), 3, 2);
    expect(after?.created).toContain('audit_events_p20010610');
  });

  it('answers a ping while open and refuses work once closed', async () => {
    const other = get().open();
    await expect(other.ping()).resolves.toBeUndefined();
    await other.close();
    await expect(other.ping()).rejects.toThrow();
    // Closing one store leaves the others working.
    await expect(get().store.ping()).resolves.toBeUndefined();
  });
}
