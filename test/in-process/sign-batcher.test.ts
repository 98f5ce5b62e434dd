// The sign batcher: one batch per thread in flight, waiting requests leave together, keys sent once per thread.
import { describe, expect, it } from 'vitest';
import { SignBatcher, type RunBatch } from '../../src/adapters/crypto/sign-batcher.js';
import { ServiceError } from '../../src/core/errors.js';
import { NEED_KEY, type SignTask } from '../../workers/sign-protocol.js';

/** A fake thread pool whose batches finish only when the test says so. */
function controllablePool(options: { knownKids?: Set<string> } = {}) {
  const calls: { batch: SignTask[]; finish: () => void; fail: (e: unknown) => void }[] = [];
  const known = options.knownKids;
  const run: RunBatch = (batch) =>
    new Promise((resolve, reject) => {
      calls.push({
        batch,
        finish: () =>
          resolve(
            batch.map((t) => {
              if (known && !known.has(t.kid) && !t.privateKeyPem) return NEED_KEY;
              if (t.privateKeyPem) known?.add(t.kid);
              return `signed:${t.kid}:${t.payload}`;
            }),
          ),
        fail: reject,
      });
    });
  return { run, calls };
}

const flush = () => new Promise((r) => setImmediate(r));

describe('SignBatcher', () => {
  it('an idle batcher dispatches each request at once, one per free thread', async () => {
    const pool = controllablePool();
    const batcher = new SignBatcher({ runBatch: pool.run, threads: 2, maxPending: 100 });
    const a = batcher.sign('k', 'pem', 'a');
    const b = batcher.sign('k', 'pem', 'b');
    expect(pool.calls.map((c) => c.batch.length)).toEqual([1, 1]);
    pool.calls.forEach((c) => c.finish());
    expect(await Promise.all([a, b])).toEqual(['signed:k:a', 'signed:k:b']);
  });

  it('requests arriving while every thread is busy leave together, shared among the freed threads', async () => {
    const pool = controllablePool();
    const batcher = new SignBatcher({ runBatch: pool.run, threads: 1, maxPending: 100 });
    const first = batcher.sign('k', 'pem', '0');
    const waiting = Array.from({ length: 5 }, (_, i) => batcher.sign('k', 'pem', String(i + 1)));
    expect(batcher.queued).toBe(5);
    expect(pool.calls).toHaveLength(1);
    pool.calls[0].finish();
    await first;
    await flush();
    expect(pool.calls).toHaveLength(2);
    expect(pool.calls[1].batch.map((t) => t.payload)).toEqual(['1', '2', '3', '4', '5']);
    pool.calls[1].finish();
    expect(await Promise.all(waiting)).toEqual(['1', '2', '3', '4', '5'].map((p) => `signed:k:${p}`));
  });

  it('never puts more than maxBatch tasks in one batch', async () => {
    const pool = controllablePool();
    const batcher = new SignBatcher({ runBatch: pool.run, threads: 1, maxPending: 100, maxBatch: 3 });
    const all = [batcher.sign('k', 'pem', 'x'), ...Array.from({ length: 7 }, () => batcher.sign('k', 'pem', 'y'))];
    while (pool.calls.some((c) => c.batch.length > 0)) {
      const call = pool.calls.shift()!;
      expect(call.batch.length).toBeLessThanOrEqual(3);
      call.finish();
      await flush();
      if (pool.calls.length === 0) break;
    }
    await Promise.all(all);
  });

  it('sends the private key only to a thread that asks for it, then signs', async () => {
    const pool = controllablePool({ knownKids: new Set() });
    const batcher = new SignBatcher({ runBatch: pool.run, threads: 1, maxPending: 100 });
    const token = batcher.sign('k1', 'PEM', 'p');
    expect(pool.calls[0].batch[0].privateKeyPem).toBeUndefined();
    pool.calls.shift()!.finish(); // the thread answers NEED_KEY
    await flush();
    expect(pool.calls[0].batch[0].privateKeyPem).toBe('PEM');
    pool.calls.shift()!.finish();
    expect(await token).toBe('signed:k1:p');
  });

  it('refuses with 503 and Retry-After when too many wait', async () => {
    const pool = controllablePool();
    const batcher = new SignBatcher({ runBatch: pool.run, threads: 1, maxPending: 2 });
    void batcher.sign('k', 'pem', 'in flight');
    void batcher.sign('k', 'pem', 'q1');
    void batcher.sign('k', 'pem', 'q2');
    const refused = await batcher.sign('k', 'pem', 'q3').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ServiceError);
    expect((refused as ServiceError).code).toBe('service_unavailable');
    expect((refused as ServiceError).retryAfterSeconds).toBeDefined();
  });

  it('refuses with the error its owner gives (the pools count it in their metrics)', async () => {
    const pool = controllablePool();
    let refusals = 0;
    const batcher = new SignBatcher({ runBatch: pool.run, threads: 1, maxPending: 0, full: () => new Error(`refusal ${++refusals}`) });
    void batcher.sign('k', 'pem', 'in flight');
    await expect(batcher.sign('k', 'pem', 'refused')).rejects.toThrow('refusal 1');
    expect(refusals).toBe(1);
  });

  it('drops requests whose client went away before dispatch', async () => {
    const pool = controllablePool();
    const batcher = new SignBatcher({ runBatch: pool.run, threads: 1, maxPending: 100 });
    void batcher.sign('k', 'pem', 'busy');
    const gone = new AbortController();
    const left = batcher.sign('k', 'pem', 'gone', gone.signal);
    const kept = batcher.sign('k', 'pem', 'kept');
    gone.abort();
    await expect(left).rejects.toThrow(); // at once, not when a thread frees
    expect(batcher.queued).toBe(1);
    pool.calls[0].finish();
    await flush();
    expect(pool.calls[1].batch.map((t) => t.payload)).toEqual(['kept']);
    pool.calls[1].finish();
    expect(await kept).toBe('signed:k:kept');
  });

  it('a failed batch rejects every request in it and frees the thread', async () => {
    const pool = controllablePool();
    const batcher = new SignBatcher({ runBatch: pool.run, threads: 1, maxPending: 100 });
    const a = batcher.sign('k', 'pem', 'a');
    pool.calls[0].fail(new Error('worker died'));
    await expect(a).rejects.toThrow('worker died');
    const b = batcher.sign('k', 'pem', 'b');
    expect(pool.calls).toHaveLength(2);
    pool.calls[1].finish();
    expect(await b).toBe('signed:k:b');
  });
});
