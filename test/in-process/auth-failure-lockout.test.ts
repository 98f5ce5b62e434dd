// The failure budget's two counts, in process (memory limiters): points reserved by checks in flight refuse
// briefly and never lock out; failed authentications spend the budget and lock the address out for the window.
import { describe, expect, it } from 'vitest';
import { Limiters, PENDING_RETRY_AFTER_SECONDS, type LimiterName } from '../../src/adapters/ratelimit/limiters.js';
import { ServiceError } from '../../src/core/errors.js';

const BUDGET = 3;
const WINDOW_SECONDS = 60;

function limiters() {
  const refusals: LimiterName[] = [];
  const limits = new Limiters({
    redis: undefined,
    keyPrefix: 'test:',
    tokenPoints: 100,
    tokenWindowSeconds: 60,
    authFailPoints: BUDGET,
    authFailWindowSeconds: WINDOW_SECONDS,
    onRefusal: (limiter) => refusals.push(limiter),
  });
  return { limits, refusals };
}

const refusal = async (promise: Promise<unknown>) => {
  const error = await promise.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(ServiceError);
  return error as ServiceError;
};
const lockedOut = (limits: Limiters, address: string) => {
  try {
    limits.assertNotLockedOut(address);
    return undefined;
  } catch (error) {
    return error as ServiceError;
  }
};

describe('failure budget: checks in flight against failures', () => {
  it('a reservation refused while the points are checks in flight gets a short Retry-After and no lockout; their success frees the points', async () => {
    const { limits, refusals } = limiters();
    const inFlight = await Promise.all(Array.from({ length: BUDGET }, () => limits.reserveAuthAttempt('192.0.2.1')));
    const refused = await refusal(limits.reserveAuthAttempt('192.0.2.1'));
    expect(refused.code).toBe('rate_limited');
    expect(refused.retryAfterSeconds).toBe(PENDING_RETRY_AFTER_SECONDS);
    expect(refusals).toEqual(['auth_pending_per_address']);
    expect(lockedOut(limits, '192.0.2.1')).toBeUndefined();
    for (const attempt of inFlight) attempt.refund();
    await new Promise((resolve) => setImmediate(resolve)); // the refunds are not awaited by their callers
    (await limits.reserveAuthAttempt('192.0.2.1')).refund();
  });

  it('failures spend the budget: the last one locks the address out for the window, the warm path included; other addresses are not affected', async () => {
    const { limits, refusals } = limiters();
    for (let i = 0; i < BUDGET - 1; i++) await (await limits.reserveAuthAttempt('192.0.2.2')).fail();
    expect(lockedOut(limits, '192.0.2.2')).toBeUndefined();
    await (await limits.reserveAuthAttempt('192.0.2.2')).fail();
    const locked = lockedOut(limits, '192.0.2.2');
    expect(locked?.code).toBe('rate_limited');
    expect(locked!.retryAfterSeconds).toBeGreaterThan(WINDOW_SECONDS / 2);
    const refused = await refusal(limits.reserveAuthAttempt('192.0.2.2'));
    expect(refused.retryAfterSeconds).toBeGreaterThan(WINDOW_SECONDS / 2);
    expect(refusals.every((r) => r === 'auth_fail_per_address')).toBe(true);
    expect(lockedOut(limits, '192.0.2.3')).toBeUndefined();
  });

  it('failures mixed with checks in flight: short refusals until the failures alone spend the budget', async () => {
    const { limits } = limiters();
    await (await limits.reserveAuthAttempt('192.0.2.4')).fail();
    const pending = [await limits.reserveAuthAttempt('192.0.2.4'), await limits.reserveAuthAttempt('192.0.2.4')];
    expect((await refusal(limits.reserveAuthAttempt('192.0.2.4'))).retryAfterSeconds).toBe(PENDING_RETRY_AFTER_SECONDS);
    for (const attempt of pending) await attempt.fail();
    expect(lockedOut(limits, '192.0.2.4')?.retryAfterSeconds).toBeGreaterThan(WINDOW_SECONDS / 2);
  });

  it('a failure with nothing reserved (a bad assertion) spends a point the same way', async () => {
    const { limits } = limiters();
    for (let i = 0; i < BUDGET; i++) await limits.recordAuthFailure('192.0.2.5');
    expect(lockedOut(limits, '192.0.2.5')?.code).toBe('rate_limited');
  });
});
