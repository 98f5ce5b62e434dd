// The agent client's token store: single-flight fetches, background renewal before expiry (the valid token
// is used meanwhile), one replacement per 401.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { RENEWAL_RETRY_GAP_MS, TokenStore } from '../../packages/client/src/token-store.js';
import type { IssuedToken } from '../../packages/client/src/service-api.js';

afterEach(() => vi.useRealTimers());

/** Lets settled promises run their reactions. */
const flush = () => new Promise((r) => setImmediate(r));

/** A fake token endpoint: each call waits until the test answers it. */
function fakeIssuer() {
  const calls: { platformId: string; answer: (token: string, ttlSeconds?: number) => void; fail: (e: unknown) => void }[] = [];
  const issue = (platformId: string) =>
    new Promise<IssuedToken>((resolve, reject) =>
      calls.push({
        platformId,
        answer: (token, ttl = 900) => resolve({ accessToken: token, expiresInSeconds: ttl }),
        fail: reject,
      }),
    );
  return { issue, calls };
}

describe('TokenStore', () => {
  it('concurrent first uses share one fetch, later uses reuse the token', async () => {
    const issuer = fakeIssuer();
    const store = new TokenStore(issuer.issue, 60);
    const many = Array.from({ length: 10 }, () => store.get('p'));
    expect(issuer.calls).toHaveLength(1);
    issuer.calls[0].answer('t1');
    expect(new Set(await Promise.all(many))).toEqual(new Set(['t1']));
    expect(await store.get('p')).toBe('t1');
    expect(issuer.calls).toHaveLength(1);
  });

  it('tokens are kept per platform', async () => {
    const issuer = fakeIssuer();
    const store = new TokenStore(issuer.issue, 60);
    const a = store.get('a');
    const b = store.get('b');
    expect(issuer.calls.map((c) => c.platformId)).toEqual(['a', 'b']);
    issuer.calls[0].answer('ta');
    issuer.calls[1].answer('tb');
    expect([await a, await b]).toEqual(['ta', 'tb']);
  });

  it('near expiry: the valid token is returned at once while one renewal runs in the background', async () => {
    vi.useFakeTimers({ now: 0, toFake: ['Date'] });
    const issuer = fakeIssuer();
    const store = new TokenStore(issuer.issue, 60);
    const first = store.get('p');
    issuer.calls[0].answer('t1', 900);
    expect(await first).toBe('t1');
    vi.setSystemTime(839_000);
    expect(await store.get('p')).toBe('t1');
    expect(issuer.calls).toHaveLength(1);
    vi.setSystemTime(841_000); // inside the last 60 s: renew, but do not wait for it
    // Resolved although the renewal has not been answered: each of these awaits completes.
    expect(await Promise.all(Array.from({ length: 5 }, () => store.get('p')))).toEqual(Array(5).fill('t1'));
    expect(issuer.calls).toHaveLength(2); // single-flight: one renewal for all of them
    issuer.calls[1].answer('t2', 900);
    await flush();
    expect(await store.get('p')).toBe('t2');
    expect(issuer.calls).toHaveLength(2);
  });

  it('a failed background renewal is reported, not thrown, while the token is valid; retried after a gap', async () => {
    vi.useFakeTimers({ now: 0, toFake: ['Date'] });
    const issuer = fakeIssuer();
    const reported: unknown[] = [];
    const store = new TokenStore(issuer.issue, 60, (platformId, error) => reported.push([platformId, (error as Error).message]));
    const first = store.get('p');
    issuer.calls[0].answer('t1', 900);
    await first;
    vi.setSystemTime(841_000);
    expect(await store.get('p')).toBe('t1');
    issuer.calls[1].fail(new Error('service down'));
    await flush();
    expect(reported).toEqual([['p', 'service down']]);
    expect(await store.get('p')).toBe('t1');
    expect(issuer.calls).toHaveLength(2); // not asked again on every request
    vi.setSystemTime(841_000 + RENEWAL_RETRY_GAP_MS);
    expect(await store.get('p')).toBe('t1');
    expect(issuer.calls).toHaveLength(3);
  });

  it('a listener that throws changes nothing (no unhandled rejection: vitest would fail the run)', async () => {
    vi.useFakeTimers({ now: 0, toFake: ['Date'] });
    const issuer = fakeIssuer();
    let told = 0;
    const store = new TokenStore(issuer.issue, 60, () => {
      told++;
      throw new Error('listener bug');
    });
    const first = store.get('p');
    issuer.calls[0].answer('t1', 900);
    await first;
    vi.setSystemTime(841_000);
    expect(await store.get('p')).toBe('t1');
    issuer.calls[1].fail(new Error('service down'));
    await flush();
    expect(told).toBe(1);
    expect(await store.get('p')).toBe('t1');
  });

  it('once the token expired, callers wait on the renewal in flight, and get its failure', async () => {
    vi.useFakeTimers({ now: 0, toFake: ['Date'] });
    const issuer = fakeIssuer();
    const store = new TokenStore(issuer.issue, 60);
    const first = store.get('p');
    issuer.calls[0].answer('t1', 900);
    await first;
    vi.setSystemTime(850_000);
    expect(await store.get('p')).toBe('t1'); // starts the background renewal
    vi.setSystemTime(900_000); // expired, the renewal still running
    let settled = false;
    const waiting = Array.from({ length: 3 }, () => store.get('p'));
    void Promise.all(waiting).finally(() => (settled = true)).catch(() => {});
    await flush();
    expect(settled).toBe(false);
    expect(issuer.calls).toHaveLength(2); // they share the background renewal
    issuer.calls[1].answer('t2', 900);
    expect(await Promise.all(waiting)).toEqual(['t2', 't2', 't2']);

    vi.setSystemTime(900_000 + 900_000); // t2 expired too, and this renewal fails: now it is the caller's
    const expired = store.get('p');
    issuer.calls[2].fail(new Error('service down'));
    await expect(expired).rejects.toThrow('service down');
  });

  it('the renewal margin is capped at a quarter of a short lifetime', async () => {
    vi.useFakeTimers({ now: 0, toFake: ['Date'] });
    const issuer = fakeIssuer();
    const store = new TokenStore(issuer.issue, 60);
    const first = store.get('p');
    issuer.calls[0].answer('t1', 40); // renew at 30 s, not at -20 s
    await first;
    vi.setSystemTime(29_000);
    expect(await store.get('p')).toBe('t1');
    expect(issuer.calls).toHaveLength(1);
  });

  it('a 401 replaces the token once, shared by every caller that saw the same refusal', async () => {
    const issuer = fakeIssuer();
    const store = new TokenStore(issuer.issue, 60);
    const first = store.get('p');
    issuer.calls[0].answer('t1');
    await first;
    const replacements = [store.replace('p', 't1'), store.replace('p', 't1')];
    expect(issuer.calls).toHaveLength(2);
    issuer.calls[1].answer('t2');
    expect(await Promise.all(replacements)).toEqual(['t2', 't2']);
    // A late caller still holding t1 gets t2 without another fetch.
    expect(await store.replace('p', 't1')).toBe('t2');
    expect(issuer.calls).toHaveLength(2);
  });

  it('a replacement refused again at once is not replaced again (the platform refuses everything)', async () => {
    const issuer = fakeIssuer();
    const store = new TokenStore(issuer.issue, 60);
    const first = store.get('p');
    issuer.calls[0].answer('t1');
    await first;
    expect(store.mayReplace('p', 't1')).toBe(true);
    const replaced = store.replace('p', 't1');
    issuer.calls[1].answer('t2');
    await replaced;
    await new Promise((r) => setImmediate(r));
    expect(store.mayReplace('p', 't2')).toBe(false);
    expect(store.mayReplace('p', 'some-other-token')).toBe(true);
  });
});
