// The revocation feed's transmitter in process (src/core/revocation), on a log in memory and the memory
// signer: the head's `live` ranges (the range helpers of feed-document), that they are exactly what the
// poll serves for any ack / maxEvents (also after entries expire), and that answers for arbitrary requests
// are slices of one array with only two shapes kept serialised, bounded in bytes and released on demand;
// and the per-credential poll budget of the routes.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { liveRangesOf, parseLiveRanges, type LiveRange } from '../../packages/protocol/src/feed-document.js';
import { RevocationTransmitter } from '../../src/core/revocation/transmitter.js';
import { firstAbove, pollAnswer } from '../../src/core/revocation/stream.js';
import { LocalBus } from '../../src/adapters/cache/invalidation-bus.js';
import { PollBudget } from '../../src/adapters/http/poll-budget.js';
import { MemorySigner } from '../support/memory/memory-store.js';
import type { RevocationEntry, RevocationStore } from '../../src/core/ports/revocation-log.js';

const PLATFORM = '11111111-1111-4111-8111-111111111111';
const HEAD_EVENT = 'urn:agent-credential-exchange:secevent:stream-head';

describe('live ranges (feed-document)', () => {
  it('turns ascending sequences into inclusive, disjoint, non-adjacent ranges', () => {
    expect(liveRangesOf([])).toEqual([]);
    expect(liveRangesOf([4])).toEqual([[4, 4]]);
    expect(liveRangesOf([1, 2, 3, 7, 9, 10])).toEqual([[1, 3], [7, 7], [9, 10]]);
  });

  it('accepts only well-formed ranges within 1..head', () => {
    expect(parseLiveRanges([], 0)).toEqual([]);
    expect(parseLiveRanges([[1, 3], [7, 7], [9, 10]], 10)).toEqual([[1, 3], [7, 7], [9, 10]]);
    const bad: unknown[] = [
      undefined, null, {}, 'x', [[1]], [[1, 2, 3]], [[0, 2]], [[2, 1]], [[1, 11]], [[1, 3], [3, 5]], [[1, 3], [4, 5]], [[5, 6], [1, 2]],
      [[1.5, 2]], [['1', 2]], [[1, Number.MAX_SAFE_INTEGER + 1]], [[1, 2], 'x'], [[-1, 2]], [[1, true]],
    ];
    for (const value of bad) expect(parseLiveRanges(value, 10), JSON.stringify(value)).toBeUndefined();
  });

  it('finds the first SET above an acknowledged sequence by bisection', () => {
    const sets = [1, 3, 4, 9].map((seq) => ({ seq }));
    expect([0, 1, 2, 3, 4, 8, 9, 100].map((from) => firstAbove(sets, from))).toEqual([0, 1, 1, 2, 3, 3, 4, 4]);
    expect(firstAbove([], 5)).toBe(0);
  });

  it('joins a page of members into an RFC 8936 answer, the head last when the page reaches it', () => {
    const sets = ['"a":"1"', '"b":"2"', '"c":"3"'].map((member) => ({ member }));
    expect(JSON.parse(pollAnswer(sets, 0, 3, '"h":"H"').toString())).toEqual({ sets: { a: '1', b: '2', c: '3', h: 'H' }, moreAvailable: false });
    expect(JSON.parse(pollAnswer(sets, 1, 2, '"h":"H"').toString())).toEqual({ sets: { b: '2' }, moreAvailable: true });
    expect(JSON.parse(pollAnswer(sets, 3, 3, '"h":"H"').toString())).toEqual({ sets: { h: 'H' }, moreAvailable: false });
  });
});

/** The revocation log port in memory: entries of one platform, each with its own expiry. */
class Log implements RevocationStore {
  entries: RevocationEntry[] = [];
  head = 0;
  add(expiresInMs: number): RevocationEntry {
    const now = Date.now();
    const entry: RevocationEntry = { platformId: PLATFORM, seq: ++this.head, kind: 'platform', agentId: null, kid: null, iatMax: Math.floor(now / 1000), createdAt: new Date(now), expiresAt: new Date(now + expiresInMs) };
    this.entries.push(entry);
    return entry;
  }
  async append(): Promise<RevocationEntry[]> {
    throw new Error('not used');
  }
  async since(_platformId: string, since: number, at: Date) {
    return { head: this.head, entries: this.entries.filter((e) => e.seq > since && e.expiresAt > at) };
  }
  async heads(ids: string[]) {
    return new Map(ids.map((id) => [id, this.head]));
  }
  async purgeExpired(at: Date) {
    this.entries = this.entries.filter((e) => e.expiresAt > at);
    return this.entries.length;
  }
  async platformExists(id: string) {
    return id === PLATFORM;
  }
  async agentsHoldingScopes() {
    return [];
  }
}

function transmitter(log: Log, answerCacheBytes?: number) {
  const signer = new MemorySigner();
  const feed = new RevocationTransmitter({
    log,
    keys: { activeKey: () => ({ kid: 'k1', privateKeyPem: 'unused' }) },
    signer,
    bus: new LocalBus(),
    transport: { publish: () => {}, subscribedPlatforms: () => [] },
    metrics: { published: () => {}, setEntriesLive: () => {} },
    onError: (_what, error) => {
      throw error;
    },
    issuer: 'https://ace.test',
    pollMs: 60_000,
    documentReuseMs: 1000,
    heartbeatMs: 10_000,
    answerCacheBytes,
  });
  return { feed, signer };
}

const payloadOf = (jws: string) => JSON.parse(Buffer.from(jws.split('.')[1], 'base64url').toString()) as Record<string, any>;

/** One poll, decoded: the sequences served, the head's body when present, moreAvailable. */
async function poll(feed: RevocationTransmitter, request: { ack?: string[]; maxEvents?: number }) {
  const answer = JSON.parse((await feed.poll(PLATFORM, request))!.toString()) as { sets: Record<string, string>; moreAvailable: boolean };
  const headJws = answer.sets[`${PLATFORM}:head`];
  const seqs = Object.keys(answer.sets).filter((jti) => !jti.endsWith(':head')).map((jti) => Number(jti.split(':')[1]));
  return { seqs, head: headJws ? (payloadOf(headJws).events[HEAD_EVENT] as { seq: number; live: LiveRange[] }) : undefined, more: answer.moreAvailable, raw: answer };
}

/** Every SET a receiver gets by paging from `from` with pages of `maxEvents`, and the head at the end. */
async function pageThrough(feed: RevocationTransmitter, maxEvents: number, from = 0) {
  const seqs: number[] = [];
  let ack = from;
  for (let page = 0; page < 1000; page++) {
    const answer = await poll(feed, { ack: ack > 0 ? [`${PLATFORM}:${ack}`] : [], maxEvents });
    seqs.push(...answer.seqs);
    if (answer.seqs.length > 0) ack = Math.max(...answer.seqs);
    if (!answer.more) return { seqs, head: answer.head! };
  }
  throw new Error('never reached the head');
}

const expand = (live: LiveRange[]) => live.flatMap(([from, to]) => Array.from({ length: to - from + 1 }, (_, i) => from + i));

afterEach(() => vi.useRealTimers());

describe('RevocationTransmitter: the head proves what the poll serves', () => {
  it("the head's live ranges are exactly the sequences served, for every page size, and expired entries are left out", async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const log = new Log();
    for (let i = 1; i <= 12; i++) log.add(i % 3 === 0 ? -1 : 60_000); // 3, 6, 9, 12 already expired
    const { feed } = transmitter(log);
    for (const maxEvents of [1, 2, 5, 100]) {
      const { seqs, head } = await pageThrough(feed, maxEvents);
      expect(seqs).toEqual([1, 2, 4, 5, 7, 8, 10, 11]);
      expect(head).toEqual({ seq: 12, live: [[1, 2], [4, 5], [7, 8], [10, 11]] });
      expect(parseLiveRanges(head.live, head.seq)).toBeDefined();
    }
    // An up-to-date receiver gets the head alone; maxEvents 0 with SETs pending gets neither.
    expect(await poll(feed, { ack: [`${PLATFORM}:12`] })).toMatchObject({ seqs: [], head: { seq: 12 }, more: false });
    expect(await poll(feed, { ack: [`${PLATFORM}:4`], maxEvents: 0 })).toMatchObject({ seqs: [], head: undefined, more: true });
  });

  it('after entries expire (and are purged) the next head leaves them out, and the poll no longer serves them', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const log = new Log();
    log.add(60_000);
    log.add(5_000);
    log.add(60_000);
    const { feed } = transmitter(log);
    expect(await pageThrough(feed, 100)).toEqual({ seqs: [1, 2, 3], head: { seq: 3, live: [[1, 3]] } });
    vi.setSystemTime(Date.now() + 6_000); // entry 2 expired; the stream is read again (older than documentReuseMs)
    expect(await pageThrough(feed, 100)).toEqual({ seqs: [1, 3], head: { seq: 3, live: [[1, 1], [3, 3]] } });
    await log.purgeExpired(new Date());
    log.add(60_000);
    feed.notify([PLATFORM]);
    expect(await pageThrough(feed, 1)).toEqual({ seqs: [1, 3, 4], head: { seq: 4, live: [[1, 1], [3, 4]] } });
    vi.setSystemTime(Date.now() + 120_000); // everything expired
    expect(await pageThrough(feed, 100)).toEqual({ seqs: [], head: { seq: 4, live: [] } });
  });

  it('a new subscriber gets the SETs above its since and a head whose live matches them', async () => {
    const log = new Log();
    log.add(60_000);
    log.add(-1);
    log.add(60_000);
    const { feed } = transmitter(log);
    const sent = (await feed.subscribed(PLATFORM, 0)).map(payloadOf);
    expect(sent.map((p) => p.jti)).toEqual([`${PLATFORM}:1`, `${PLATFORM}:3`, `${PLATFORM}:head`]);
    expect(sent[2].events[HEAD_EVENT]).toEqual({ seq: 3, live: [[1, 1], [3, 3]] });
  });
});

describe('RevocationTransmitter: answers for arbitrary requests', () => {
  it('varied ack / maxEvents get correct answers while the kept answers stay within their bound', async () => {
    const log = new Log();
    for (let i = 0; i < 200; i++) log.add(60_000);
    const { feed, signer } = transmitter(log);
    const full = await poll(feed, { maxEvents: 1000 });
    expect(full.seqs).toHaveLength(200);
    const fullBytes = Buffer.byteLength(JSON.stringify(full.raw));
    const signed = signer.signed.length;
    let seed = 7;
    const random = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let i = 0; i < 3000; i++) {
      const ack = random(210);
      const maxEvents = random(1001);
      const answer = await poll(feed, { ack: ack > 0 ? [`${PLATFORM}:${ack}`] : [], maxEvents });
      const expected = Array.from({ length: 200 }, (_, k) => k + 1).filter((seq) => seq > ack).slice(0, maxEvents);
      expect(answer.seqs).toEqual(expected);
      expect(answer.more).toBe(expected.length < Math.max(0, 200 - ack));
      // At most four answers of the stream are kept, each at most the whole stream.
      expect(feed.answerCacheBytes).toBeLessThanOrEqual(4 * fullBytes);
    }
    // Nothing is signed again per request: the SETs were signed once, the head at most once per half heartbeat.
    expect(signer.signed.length - signed).toBeLessThanOrEqual(2);
    expect(feed.answerCacheBytes).toBeGreaterThan(0);
    feed.release(PLATFORM);
    expect(feed.answerCacheBytes).toBe(0);
  });

  it('after polls interleaved with the stream being read again, releasing the platform leaves no kept bytes counted', async () => {
    const log = new Log();
    log.add(60_000);
    const { feed } = transmitter(log);
    for (let round = 0; round < 20; round++) {
      const polls = [feed.poll(PLATFORM, { maxEvents: 1000 }), feed.poll(PLATFORM, { ack: [`${PLATFORM}:${log.head}`] })];
      log.add(60_000);
      feed.notify([PLATFORM]); // the next poll reads the stream again while these are on their way
      polls.push(feed.poll(PLATFORM, { maxEvents: 1000 }));
      await Promise.all(polls);
    }
    expect(feed.answerCacheBytes).toBeGreaterThan(0);
    feed.release(PLATFORM);
    expect(feed.answerCacheBytes).toBe(0);
  });

  it('keeps no more answer bytes than its bound, over every platform (answers beyond it are computed, not kept)', async () => {
    const log = new Log();
    for (let i = 0; i < 50; i++) log.add(60_000);
    const { feed } = transmitter(log, 1000);
    const answer = await poll(feed, { maxEvents: 1000 });
    expect(Buffer.byteLength(JSON.stringify(answer.raw))).toBeGreaterThan(1000);
    expect(answer.seqs).toHaveLength(50);
    expect(feed.answerCacheBytes).toBe(0);
    await poll(feed, { ack: [`${PLATFORM}:50`] }); // the head alone: small enough to keep
    expect(feed.answerCacheBytes).toBeGreaterThan(0);
    expect(feed.answerCacheBytes).toBeLessThanOrEqual(1000);
  });

  it('frees kept answers on its timer once they can no longer be served (the stream due to be read again)', async () => {
    vi.useFakeTimers();
    const log = new Log();
    for (let i = 0; i < 5; i++) log.add(600_000);
    const { feed } = transmitter(log);
    feed.start();
    try {
      await poll(feed, { maxEvents: 1000 });
      expect(feed.answerCacheBytes).toBeGreaterThan(0);
      await vi.advanceTimersByTimeAsync(2_500); // past documentReuseMs: nobody polled, the sweep frees them
      expect(feed.answerCacheBytes).toBe(0);
    } finally {
      feed.stop();
    }
  });

  it('a request repeated on a steady stream is answered synchronously from memory (pollNow)', async () => {
    const log = new Log();
    log.add(60_000);
    const { feed } = transmitter(log);
    const request = { ack: [`${PLATFORM}:1`] };
    expect(feed.pollNow(PLATFORM, request)).toBeUndefined(); // nothing read yet
    const first = await feed.poll(PLATFORM, request);
    expect(feed.pollNow(PLATFORM, request)).toBe(first);
    // Any other request is a slice of the same array, answered synchronously too.
    expect(JSON.parse(feed.pollNow(PLATFORM, { maxEvents: 1 })!.toString()).sets).toHaveProperty(`${PLATFORM}:1`);
  });
});

describe('PollBudget (adapters/http/poll-budget.ts): polls per feed credential', () => {
  it('allows the burst, then perSecond, per credential; a deleted credential loses its bucket', () => {
    const budget = new PollBudget({ perSecond: 2, burst: 4 });
    const at = 1_000_000;
    const taken = (id: string, now: number, n: number) => Array.from({ length: n }, () => budget.take(id, PLATFORM, now)).filter(Boolean).length;
    expect(taken('a', at, 10)).toBe(4);
    expect(taken('b', at, 10)).toBe(4); // another credential: its own bucket
    expect(taken('a', at + 500, 10)).toBe(1); // half a second: one more
    expect(taken('a', at + 10_000, 10)).toBe(4); // never more than the burst
    expect(budget.size).toBe(2);
    budget.release(PLATFORM, (_platform, id) => id === 'b');
    expect(budget.size).toBe(1);
    budget.release(undefined, () => false);
    expect(budget.size).toBe(0);
  });
});
