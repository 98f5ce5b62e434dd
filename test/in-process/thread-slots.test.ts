// A task takes a thread only when one is loaded and free: never one whose replacement is still loading.
import { describe, expect, it } from 'vitest';
import { ThreadSlots } from '../../src/adapters/crypto/thread-slots.js';

describe('ThreadSlots', () => {
  it('hands out as many slots as there are threads, the next once one is released', async () => {
    const slots = new ThreadSlots({ threads: 2 });
    expect(await slots.take(1000)).toBe(true);
    expect(await slots.take(1000)).toBe(true);
    const third = slots.take(10_000);
    let taken = false;
    void third.then(() => (taken = true));
    await Promise.resolve();
    expect(taken).toBe(false);
    slots.release();
    expect(await third).toBe(true);
  });

  it('a stopped thread gives no slot until its replacement has loaded', async () => {
    const slots = new ThreadSlots({ threads: 1 });
    expect(await slots.take(1000)).toBe(true);
    slots.threadStopped(); // the task's thread crashed; Piscina starts a replacement
    slots.release();
    const next = slots.take(10_000);
    let taken = false;
    void next.then(() => (taken = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(taken).toBe(false);
    slots.threadLoaded();
    expect(await next).toBe(true);
  });

  it('gives up after its bound when no thread loads', async () => {
    const slots = new ThreadSlots({ threads: 1 });
    slots.threadStopped();
    expect(await slots.take(20)).toBe(false);
  });

  it('the pool\'s first threads announcing themselves change nothing', async () => {
    const slots = new ThreadSlots({ threads: 1 });
    slots.threadLoaded();
    expect(await slots.take(1000)).toBe(true);
    expect(await slots.take(20)).toBe(false);
  });
});
