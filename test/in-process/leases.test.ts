// Leased limits (src/adapters/ratelimit/leases.ts, docs/decisions.md "Leased limits"): instances spend
// points counted in a shared limiter in batches. One memory limiter stands in for Redis, shared by two
// LeasedPoints (two instances); the bounds of the documented overshoot and undershoot are held here.
import { describe, expect, it } from 'vitest';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { LeasedPoints, leaseSize } from '../../src/adapters/ratelimit/leases.js';

const POINTS = 100;
const LEASE = 25;

function shared() {
  const limiter = new RateLimiterMemory({ points: POINTS, duration: 60 });
  let consumes = 0;
  const consume = limiter.consume.bind(limiter);
  limiter.consume = (key, points) => {
    consumes++;
    return consume(key, points);
  };
  const instance = () => new LeasedPoints({ limiter, points: POINTS, size: LEASE, rememberRefusals: true });
  return { limiter, instance, consumes: () => consumes };
}

/** Takes points at the instances in turn until every one is refused; how many each got. */
async function spendAll(instances: LeasedPoints[], key: string): Promise<number[]> {
  const got = instances.map(() => 0);
  const refused = instances.map(() => false);
  for (let i = 0; refused.includes(false); i = (i + 1) % instances.length) {
    if (refused[i]) continue;
    try {
      await instances[i].take(key);
      got[i]++;
    } catch (error) {
      expect(error).toBeInstanceOf(RateLimiterRes);
      refused[i] = true;
    }
  }
  return got;
}

describe('leased limits', () => {
  it('instances never spend more than the budget per window, nor fewer than the budget less one lease per other instance', async () => {
    const { instance } = shared();
    const instances = [instance(), instance(), instance()];
    const got = await spendAll(instances, 'key');
    const total = got.reduce((a, b) => a + b, 0);
    expect(total).toBeLessThanOrEqual(POINTS);
    expect(total).toBeGreaterThanOrEqual(POINTS - (instances.length - 1) * LEASE);
  });

  it('after the shared count is lost (a Redis restart), the fleet exceeds the budget by at most one lease per instance', async () => {
    const { limiter, instance } = shared();
    const instances = [instance(), instance()];
    // Each instance holds a fresh lease when Redis loses the count.
    await instances[0].take('key');
    await instances[1].take('key');
    await limiter.delete('key');
    const got = await spendAll(instances, 'key');
    const total = got.reduce((a, b) => a + b, 0) + 2;
    expect(total).toBeGreaterThan(POINTS); // the leases held before the loss are spent on top
    expect(total).toBeLessThanOrEqual(POINTS + instances.length * LEASE);
  });

  it('a lease serves its points without the shared store; requests that find it empty wait for one new lease together', async () => {
    const { instance, consumes } = shared();
    const leases = instance();
    await Promise.all(Array.from({ length: LEASE }, () => leases.take('key')));
    expect(consumes()).toBe(1);
    expect(leases.takeLocal('key')).toBeUndefined(); // spent: the next point needs a lease
    await Promise.all(Array.from({ length: LEASE }, () => leases.take('key')));
    expect(consumes()).toBe(2);
  });

  it('a spent budget is refused in process until the window ends, with the time left as its Retry-After', async () => {
    const { instance, consumes } = shared();
    const leases = instance();
    await spendAll([leases], 'key');
    const asked = consumes();
    const refusal = await leases.take('key').then(() => undefined, (error: unknown) => error);
    expect(refusal).toBeInstanceOf(RateLimiterRes);
    expect((refusal as RateLimiterRes).msBeforeNext).toBeGreaterThan(50_000);
    expect(consumes()).toBe(asked);
  });

  it('a point given back returns to the lease, never past what it was granted', async () => {
    const { instance, consumes } = shared();
    const leases = instance();
    const lease = await leases.take('key');
    leases.giveBack('key', lease);
    leases.giveBack('key', lease);
    expect(lease.left).toBe(LEASE);
    for (let i = 0; i < LEASE; i++) expect(leases.takeLocal('key')).toBeDefined();
    expect(leases.takeLocal('key')).toBeUndefined();
    expect(consumes()).toBe(1);
  });

  it('sizes: at most the setting and a quarter of the budget; small budgets are not leased', () => {
    expect(leaseSize(120, 32)).toBe(30);
    expect(leaseSize(1000, 32)).toBe(32);
    expect(leaseSize(6, 32)).toBe(1);
    expect(leaseSize(20, 4, 5)).toBe(4);
  });
});
