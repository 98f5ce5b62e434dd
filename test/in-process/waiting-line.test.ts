// The waiting line in front of a thread pool: a caller whose client left gets out of the line at once and
// costs no thread; once dispatched, its task is never interrupted (Piscina would stop the thread).
import { describe, expect, it, vi } from 'vitest';
import { WaitingLine } from '../../src/adapters/crypto/waiting-line.js';

/** A fake pool: each dispatch waits until the test finishes it; it records what it was given. */
function pool() {
  const calls: { batch: string[]; finish: () => void }[] = [];
  const run = (batch: string[]) =>
    new Promise<string[]>((resolve) => calls.push({ batch, finish: () => resolve(batch.map((x) => `done:${x}`)) }));
  return { run, calls };
}

const full = () => new Error('full');
const flush = () => new Promise((r) => setImmediate(r));

describe('WaitingLine', () => {
  it('dispatches at once while a slot is free, then queues in arrival order', async () => {
    const p = pool();
    const line = new WaitingLine({ run: p.run, slots: 2, maxWaiting: 10, full });
    const answers = ['a', 'b', 'c'].map((x) => line.run(x));
    expect(p.calls.map((c) => c.batch)).toEqual([['a'], ['b']]);
    expect(line.queued).toBe(1);
    p.calls[1].finish();
    await flush();
    expect(p.calls[2].batch).toEqual(['c']);
    p.calls[0].finish();
    p.calls[2].finish();
    expect(await Promise.all(answers)).toEqual(['done:a', 'done:b', 'done:c']);
  });

  it('a waiting caller whose client left is rejected at once, frees its place and never reaches a thread', async () => {
    const p = pool();
    const line = new WaitingLine({ run: p.run, slots: 1, maxWaiting: 1, full });
    void line.run('running');
    const client = new AbortController();
    const left = line.run('left', client.signal);
    expect(line.isFull).toBe(true);
    client.abort(new Error('client gone'));
    await expect(left).rejects.toThrow('client gone');
    expect(line.queued).toBe(0);
    expect(line.isFull).toBe(false);
    const next = line.run('next');
    p.calls[0].finish();
    await flush();
    expect(p.calls.map((c) => c.batch)).toEqual([['running'], ['next']]);
    p.calls[1].finish();
    expect(await next).toBe('done:next');
  });

  it('a dispatched task runs to its end when its client leaves (its answer still settles)', async () => {
    const p = pool();
    const line = new WaitingLine({ run: p.run, slots: 1, maxWaiting: 1, full });
    const client = new AbortController();
    const answer = line.run('x', client.signal);
    client.abort();
    p.calls[0].finish();
    expect(await answer).toBe('done:x');
  });

  it('refuses when every slot is busy and the line is full, even with a line of 0', async () => {
    const p = pool();
    const line = new WaitingLine({ run: p.run, slots: 1, maxWaiting: 0, full });
    const first = line.run('a');
    await expect(line.run('b')).rejects.toThrow('full');
    p.calls[0].finish();
    await first;
    await flush();
    const third = line.run('c');
    p.calls[1].finish();
    expect(await third).toBe('done:c');
  });

  it('takes batches of up to maxBatch, shared among the free slots', async () => {
    const p = pool();
    const line = new WaitingLine({ run: p.run, slots: 1, maxWaiting: 100, full, maxBatch: 3 });
    const all = ['0', '1', '2', '3', '4', '5'].map((x) => line.run(x));
    p.calls[0].finish();
    await flush();
    expect(p.calls[1].batch).toEqual(['1', '2', '3']);
    p.calls[1].finish();
    await flush();
    expect(p.calls[2].batch).toEqual(['4', '5']);
    p.calls[2].finish();
    await Promise.all(all);
  });

  it('keeps arrival order through a long backlog, skipping callers that left, without keeping what it served', async () => {
    const p = pool();
    const line = new WaitingLine({ run: p.run, slots: 1, maxWaiting: 10_000, full, maxBatch: 4 });
    const clients = Array.from({ length: 3000 }, () => new AbortController());
    const answers = clients.map((c, i) => line.run(String(i), c.signal).catch(() => 'left'));
    clients.forEach((c, i) => i % 3 === 1 && c.abort());
    const served: string[] = [];
    const held = () => (line as unknown as { waiting: unknown[] }).waiting.length;
    let heldWhileBusy = Infinity;
    while (p.calls.length > 0) {
      const call = p.calls.shift()!;
      served.push(...call.batch);
      call.finish();
      await flush();
      if (line.queued > 0) heldWhileBusy = Math.min(heldWhileBusy, held());
    }
    // What was served is dropped in chunks while the backlog drains, and all of it at the end.
    expect(heldWhileBusy).toBeLessThan(1500);
    expect(held()).toBe(0);
    const expected = clients.map((_, i) => String(i)).filter((_, i) => i % 3 !== 1);
    expect(served).toEqual(expected);
    expect((await Promise.all(answers)).filter((a) => a === 'left')).toHaveLength(1000);
  });

  it('callers that left do not pile up while the threads are stuck', async () => {
    const p = pool();
    const line = new WaitingLine({ run: p.run, slots: 1, maxWaiting: 10, full });
    void line.run('stuck');
    for (let i = 0; i < 10_000; i++) {
      const client = new AbortController();
      const left = line.run(`left${i}`, client.signal);
      client.abort();
      await left.catch(() => undefined);
    }
    expect(line.queued).toBe(0);
    expect((line as unknown as { waiting: unknown[] }).waiting.length).toBeLessThan(100);
  });

  it('overflow: admits its places beyond maxWaiting, each waiting at most maxWaitMs before the full refusal', async () => {
    vi.useFakeTimers();
    try {
      const p = pool();
      let places = 2;
      const line = new WaitingLine({ run: p.run, slots: 1, maxWaiting: 1, full, overflow: { places: () => places, maxWaitMs: 1000 } });
      const running = line.run('running');
      const waiting = line.run('waiting');
      const served = line.run('served');
      const late = line.run('late').catch((error: Error) => error.message);
      await expect(line.run('refused')).rejects.toThrow('full');
      p.calls[0].finish();
      await running;
      await vi.advanceTimersByTimeAsync(0);
      expect(p.calls[1].batch).toEqual(['waiting']);
      p.calls[1].finish();
      await waiting;
      await vi.advanceTimersByTimeAsync(0);
      expect(p.calls[2].batch).toEqual(['served']); // reached a thread within its bound: no refusal later
      await vi.advanceTimersByTimeAsync(1000);
      expect(await late).toBe('full');
      p.calls[2].finish();
      expect(await served).toBe('done:served');
      await vi.advanceTimersByTimeAsync(0);
      expect(line.queued).toBe(0);
      // No places left (the warm-up is over): the line is as long as maxWaiting again.
      places = 0;
      void line.run('busy');
      void line.run('queued');
      await expect(line.run('refused again')).rejects.toThrow('full');
    } finally {
      vi.useRealTimers();
    }
  });
});
