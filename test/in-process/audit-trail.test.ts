// In-process tests of the audit trail's pure logic: group commit (answers released only when their
// batch is durable), the spool fallback and its drain without loss or duplicates, a full spool refusing,
// orphaned segments of dead processes, and the query parameters of GET /admin/v1/events.
import { appendFileSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AuditTrail, type TrailObserver } from '../../src/adapters/audit-trail/trail.js';
import { Spool } from '../../src/adapters/audit-trail/spool.js';
import { auditEvents, type AuditEvent } from '../../src/core/audit/events.js';
import { encodeCursor, parseEventQuery } from '../../src/adapters/http/audit-query.js';
import type { AuditStore } from '../../src/core/ports/audit-store.js';
import { ServiceError } from '../../src/core/errors.js';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
const tmp = () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ace-audit-unit-'));
  dirs.push(dir);
  return dir;
};

/** An in-memory store keyed like the table ((at, id) unique), that can be switched down or held. */
class FakeStore implements AuditStore {
  rows = new Map<string, AuditEvent>();
  statements: number[] = [];
  down = false;
  private held: (() => void)[] = [];
  hold = false;

  async insert(events: AuditEvent[]): Promise<number> {
    if (this.down) throw Object.assign(new Error('connection refused'), { code: 'ECONNREFUSED' });
    if (this.hold) await new Promise<void>((resolve) => this.held.push(resolve));
    this.statements.push(events.length);
    let inserted = 0;
    for (const e of events) {
      const key = `${e.at}/${e.id}`;
      if (!this.rows.has(key)) {
        this.rows.set(key, e);
        inserted++;
      }
    }
    return inserted;
  }
  release() {
    this.hold = false;
    this.held.splice(0).forEach((r) => r());
  }
  async list(): Promise<AuditEvent[]> {
    return [...this.rows.values()];
  }
  async maintain() {
    return { created: [], dropped: [], deleted: 0 };
  }
  async ping() {
    if (this.down) throw new Error('down');
  }
  async close() {}
}

const quiet: TrailObserver = { written() {}, batch() {}, failed() {}, spoolDepth() {}, spooling() {}, refusing() {}, postgresDown() {}, drained() {}, leftInSpool() {} };
const options = { flushMs: 2, batchMax: 1000, maxInFlight: 1, writeTimeoutMs: 200, drainIntervalMs: 60_000 };
const issued = (i: number) =>
  auditEvents.tokenIssued({ jti: crypto.randomUUID(), agentId: crypto.randomUUID(), platformId: crypto.randomUUID(), scope: `s${i}`, kid: 'k', clientAddress: '10.0.0.1', by: { method: 'client_secret' } });

describe('group commit', () => {
  it('writes the events of many requests in few statements and answers none before its batch commits', async () => {
    const store = new FakeStore();
    const trail = new AuditTrail({ store, spool: new Spool({ dataDir: tmp(), maxBytes: 1e9 }), ...options, observer: quiet });
    store.hold = true;
    let released = 0;
    const waits = Array.from({ length: 500 }, (_, i) => trail.record(issued(i)).then(() => released++));
    await new Promise((r) => setTimeout(r, 50));
    expect(released).toBe(0); // the statement has not committed: nobody is answered
    store.release();
    await Promise.all(waits);
    expect(store.rows.size).toBe(500);
    expect(store.statements.length).toBeLessThanOrEqual(3);
    await trail.close();
  });
});

describe('spool', () => {
  it('the spool depth follows the segment files: counted per file, gone with the file', async () => {
    const dir = tmp();
    const spool = new Spool({ dataDir: dir, maxBytes: 1e9 });
    await spool.append([issued(1), issued(2)]);
    await spool.seal();
    await spool.append([issued(3)]);
    expect(spool.depth).toBe(3);
    const sealed = readdirSync(path.join(dir, 'audit-spool')).find((name) => name.endsWith('.ready'))!;
    rmSync(path.join(dir, 'audit-spool', sealed)); // removed by hand
    spool.claimDrainable();
    expect(spool.depth).toBe(1);
    await spool.close();
  });

  it('takes the batches Postgres refuses (fsync before answering), then drains them once, without duplicates', async () => {
    const store = new FakeStore();
    const dir = tmp();
    const spool = new Spool({ dataDir: dir, maxBytes: 1e9 });
    const trail = new AuditTrail({ store, spool, ...options, observer: quiet });
    await trail.record(issued(0));
    store.down = true;
    const during = Array.from({ length: 50 }, (_, i) => issued(i + 1));
    await Promise.all(during.map((e) => trail.record(e)));
    expect(trail.spooling).toBe(true);
    expect(spool.depth).toBe(50);
    expect(readdirSync(path.join(dir, 'audit-spool')).length).toBe(1);
    await trail.drain(); // Postgres still down: nothing moves
    expect(store.rows.size).toBe(1);

    store.down = false;
    await trail.drain();
    expect(trail.spooling).toBe(false);
    expect(store.rows.size).toBe(51);
    expect(spool.depth).toBe(0);
    expect(readdirSync(path.join(dir, 'audit-spool'))).toEqual([]);
    // A replay of the same events (say, a batch that timed out but committed) adds nothing.
    await store.insert(during);
    expect(store.rows.size).toBe(51);
    await trail.close();
  });

  it('refuses when neither Postgres nor the spool can take the event', async () => {
    const store = new FakeStore();
    store.down = true;
    const trail = new AuditTrail({ store, spool: new Spool({ dataDir: tmp(), maxBytes: 100 }), ...options, observer: quiet });
    await expect(trail.record(issued(0))).rejects.toThrow(/spool is full/);
    await trail.close();
  });

  it('drains the segments a dead process left, skipping a torn last line', async () => {
    const dir = tmp();
    const spoolDir = path.join(dir, 'audit-spool');
    new Spool({ dataDir: dir, maxBytes: 1e9 }); // creates the directory
    const events = [issued(1), issued(2)];
    // pid 2^22+1 is above Linux's pid_max default: no such process.
    const orphan = path.join(spoolDir, `spool-${2 ** 22 + 1}-deadbeef-1.open`);
    writeFileSync(orphan, events.map((e) => JSON.stringify(e)).join('\n') + '\n');
    appendFileSync(orphan, '{"id":"torn');
    const store = new FakeStore();
    const trail = new AuditTrail({ store, spool: new Spool({ dataDir: dir, maxBytes: 1e9 }), ...options, observer: quiet });
    await trail.drain();
    expect([...store.rows.values()].map((e) => e.id).sort()).toEqual(events.map((e) => e.id).sort());
    expect(readdirSync(spoolDir)).toEqual([]);
    await trail.close();
  });
});

describe('GET /admin/v1/events parameters', () => {
  it('parses filters, limit and cursor', () => {
    const cursor = encodeCursor({ at: 1_700_000_000_000, id: '6ba7b810-9dad-11d1-80b4-00c04fd430c8' });
    const q = parseEventQuery(
      `type=token.issued,grant.put&type=token.refused&agent_id=6BA7B810-9DAD-11D1-80B4-00C04FD430C8&since=2026-01-01T00:00:00.5%2B01:00&limit=7&cursor=${cursor}`,
    );
    expect(q.types.sort()).toEqual(['grant.put', 'token.issued', 'token.refused']);
    expect(q.agentId).toBe('6ba7b810-9dad-11d1-80b4-00c04fd430c8');
    expect(q.since).toBe(Date.parse('2025-12-31T23:00:00.500Z'));
    expect(q.limit).toBe(7);
    expect(q.after).toEqual({ at: 1_700_000_000_000, id: '6ba7b810-9dad-11d1-80b4-00c04fd430c8' });
    expect(parseEventQuery('').limit).toBe(100);
  });

  it.each([
    ['type=nope', 'type'],
    ['limit=-1', 'limit'],
    ['limit=1.5', 'limit'],
    ['since=2026-01-01', 'since'],
    ['until=now', 'until'],
    ['platform_id=abc', 'platform_id'],
    ['cursor=%00', 'cursor'],
    ['jti=x', 'jti'],
    ['agent_id=6ba7b810-9dad-11d1-80b4-00c04fd430c8&agent_id=6ba7b810-9dad-11d1-80b4-00c04fd430c8', 'agent_id'],
  ])('%s → 422 naming %s', (raw, name) => {
    let error: unknown;
    try {
      parseEventQuery(raw);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ServiceError);
    expect((error as ServiceError).code).toBe('validation_error');
    expect((error as ServiceError).message.startsWith(`${name} `)).toBe(true);
  });
});
