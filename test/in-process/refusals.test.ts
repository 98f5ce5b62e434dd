// The bounds of RefusalRecorder (src/adapters/audit-trail/refusals.ts), the audit sink in front of the trail,
// with an in-memory sink behind it: what is stored one by one, what is summed, that a flood of addresses or
// agents stays bounded, and that every other event passes; and the door's count of refusals before any
// credential check (UncheckedRefusals, src/adapters/http/token-door.ts), never stored.
import { afterEach, describe, expect, it } from 'vitest';
import { auditEvents, type AuditEvent, type AuditSink } from '../../src/core/audit/events.js';
import { RefusalRecorder } from '../../src/adapters/audit-trail/refusals.js';
import { UncheckedRefusals } from '../../src/adapters/http/token-door.js';

const AGENT = '6ba7b810-9dad-11d1-80b4-00c04fd430c8';

function recorder(perWindow: number, extra: { maxTracked?: number; processPerWindow?: number } = {}) {
  const events: AuditEvent[] = [];
  const sink: AuditSink = { record: async (e) => void events.push(e), emit: (e) => void events.push(e) };
  const bounded = new RefusalRecorder({ sink, bounds: { perWindow, windowSeconds: 3600, ...extra } });
  open.push(bounded);
  // What the core emits for a refused credential check.
  const r = { refused: (event: AuditEvent) => bounded.emit(event), endWindow: () => bounded.endWindow(), close: () => bounded.close() };
  return { r, bounded, events };
}
const open: { close(): void }[] = [];
afterEach(() => open.splice(0).forEach((r) => r.close()));

const wrong = (clientAddress: string, agentId?: string): AuditEvent =>
  auditEvents.tokenRefused({ errorCode: 'invalid_credentials', agentId, clientAddress, by: { method: 'client_secret', apiKeyId: 'agnt_kid_x' } });
const types = (events: AuditEvent[]) => events.map((e) => e.type);

describe('UncheckedRefusals (the token door)', () => {
  it('logs the counts of refusals before a credential check once per window, and a quiet window logs nothing', () => {
    const logged: Record<string, number>[] = [];
    const unchecked = new UncheckedRefusals({ windowSeconds: 3600, log: ({ byCode }) => void logged.push(byCode) });
    open.push(unchecked);
    for (let i = 0; i < 1000; i++) unchecked.refused(i % 2 ? 'validation_error' : 'unsupported_media_type', '192.0.2.1');
    unchecked.endWindow();
    expect(logged).toEqual([{ unsupported_media_type: 500, validation_error: 500 }]);
    unchecked.endWindow();
    expect(logged.length).toBe(1);
  });
});

describe('RefusalRecorder', () => {
  it('passes every other event through, recorded or emitted as it came', async () => {
    const { bounded, events } = recorder(1);
    const issued = auditEvents.tokenIssued({ jti: crypto.randomUUID(), agentId: AGENT, platformId: AGENT, scope: 's', kid: 'k', clientAddress: '192.0.2.1', by: { method: 'client_secret' } });
    for (let i = 0; i < 3; i++) await bounded.record({ ...issued, id: crypto.randomUUID() });
    bounded.emit(auditEvents.listingServed({ agentId: AGENT, clientAddress: '192.0.2.1' }));
    bounded.endWindow();
    expect(types(events)).toEqual(['token.issued', 'token.issued', 'token.issued', 'listing.served']);
  });

  it('stores up to the bound per address, then sums the rest in one aggregate per window', () => {
    const { r, events } = recorder(3);
    for (let i = 0; i < 10; i++) r.refused(wrong('192.0.2.1'));
    expect(types(events)).toEqual(['token.refused', 'token.refused', 'token.refused']);
    r.endWindow();
    expect(events.slice(3).map((e) => [e.type, e.clientAddress, e.data?.refusals, e.data?.error_codes])).toEqual([
      ['token.refusals_aggregated', '192.0.2.1', 7, { invalid_credentials: 7 }],
    ]);
    // A new window: the address has its bound again.
    r.refused(wrong('192.0.2.1'));
    expect(events.at(-1)!.type).toBe('token.refused');
  });

  it('bounds one agent tried from many addresses, with one aggregate for the agent only', () => {
    const { r, events } = recorder(3);
    for (let i = 0; i < 100; i++) r.refused(wrong(`198.51.100.${i}`, AGENT));
    r.endWindow();
    expect(events.filter((e) => e.type === 'token.refused').length).toBe(3);
    const aggregates = events.filter((e) => e.type === 'token.refusals_aggregated');
    expect(aggregates.map((e) => [e.agentId, e.clientAddress, e.data?.refusals])).toEqual([[AGENT, null, 97]]);
  });

  it('bounds the whole process, and the number of addresses it tracks', () => {
    const { r, events } = recorder(2, { processPerWindow: 10, maxTracked: 50 });
    for (let i = 0; i < 5000; i++) r.refused(wrong(`10.${i >> 8}.${i & 255}.1`));
    r.endWindow();
    const stored = events.filter((e) => e.type === 'token.refused');
    const aggregates = events.filter((e) => e.type === 'token.refusals_aggregated');
    expect(stored.length).toBe(10);
    // Every refusal is either stored or counted in exactly one aggregate (no agent here).
    expect(stored.length + aggregates.reduce((n, e) => n + (e.data?.refusals ?? 0), 0)).toBe(5000);
    expect(aggregates.length).toBeLessThanOrEqual(2);
    expect(aggregates.every((e) => e.clientAddress === null)).toBe(true);
  });

  it('writes the current window at close', () => {
    const { r, events } = recorder(1);
    r.refused(wrong('192.0.2.9'));
    r.refused(wrong('192.0.2.9'));
    r.close();
    expect(types(events)).toEqual(['token.refused', 'token.refusals_aggregated']);
  });
});
