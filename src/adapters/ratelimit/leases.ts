// Points leased from a shared limiter in batches and spent in process (docs/decisions.md, Leased limits).
// One `consume(key, size)` counts a whole lease in Redis at once; the lease's points are then taken one at
// a time without a round trip, until they run out or the Redis window they were counted in ends (the lease
// expires with it, unused points lost). So the shared count never trails what an instance spent: a key gets
// at most its budget per window across the fleet, while Redis keeps its counts. What it can exceed it by, at
// most one lease per instance: the window after a Redis restart or flush (and the insurance limiter's
// in-process budget while Redis is away), in which the leases counted before are still spent. What it costs:
// an instance may be refused while another still holds unspent points of the same window (at most one
// lease each).
import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';

/** Keys remembered at most (a flood of keys cannot grow the map further; a forgotten lease is just unspent). */
const MAX_LEASES = 100_000;

export interface Lease {
  /** Points left to take. */
  left: number;
  /** Points this lease was granted (what `giveBack` may restore). */
  readonly granted: number;
  /** When the Redis window the points were counted in ends (ms, this process's clock). */
  readonly expiresAt: number;
  /** The window's budget is spent (the lease holds none): refused until `expiresAt`, without asking Redis. */
  readonly refused?: RateLimiterRes;
}

export class LeasedPoints {
  private readonly leases = new Map<string, Lease>();
  /** One lease request per key at a time: requests that find the lease empty wait for it (single flight). */
  private readonly flights = new Map<string, Promise<void>>();

  constructor(
    private readonly options: {
      limiter: RateLimiterAbstract;
      /** The limiter's points per window. */
      points: number;
      /** Points leased at once (≥ 2; with 1, spend through the limiter directly). */
      size: number;
      /** Keep a refusal until the window ends (a count that only grows in a window: the token limit). */
      rememberRefusals: boolean;
    },
  ) {}

  /** A live lease of `key` with a point taken from it, or undefined (none left here: `take` asks Redis). */
  takeLocal(key: string): Lease | undefined {
    const lease = this.live(key);
    if (lease && lease.left > 0) {
      lease.left--;
      return lease;
    }
    if (lease?.refused) throw refusalLeft(lease);
    return undefined;
  }

  /**
   * Takes one point: from the lease when it has one, else from a new lease (one request per key at a
   * time). Throws the RateLimiterRes of a refusal, or the store's own error (no insurance answered).
   */
  async take(key: string): Promise<Lease> {
    for (;;) {
      const lease = this.takeLocal(key);
      if (lease) return lease;
      let flight = this.flights.get(key);
      if (!flight) {
        flight = this.lease(key).finally(() => this.flights.delete(key));
        this.flights.set(key, flight);
      }
      await flight;
    }
  }

  /** A point taken from `lease` goes back to it (not to Redis), while the lease is the key's and alive. */
  giveBack(key: string, lease: Lease): void {
    if (this.leases.get(key) === lease && lease.expiresAt > Date.now() && lease.left < lease.granted) lease.left++;
  }

  private live(key: string): Lease | undefined {
    const lease = this.leases.get(key);
    if (lease && lease.expiresAt <= Date.now()) {
      this.leases.delete(key);
      return undefined;
    }
    return lease;
  }

  private async lease(key: string): Promise<void> {
    const { limiter, points, size, rememberRefusals } = this.options;
    let res: RateLimiterRes;
    let granted: number;
    try {
      res = await limiter.consume(key, size);
      granted = size;
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      res = rejection;
      // What was left before this lease was counted (the rest of it counts for nothing: the window is spent).
      granted = Math.max(0, Math.min(size, points - (res.consumedPoints - size)));
      if (granted === 0) {
        if (rememberRefusals) this.set(key, { left: 0, granted: 0, expiresAt: Date.now() + res.msBeforeNext, refused: res });
        throw res;
      }
    }
    this.set(key, { left: granted, granted, expiresAt: Date.now() + res.msBeforeNext });
  }

  private set(key: string, lease: Lease): void {
    if (lease.expiresAt <= Date.now()) return;
    if (this.leases.size >= MAX_LEASES && !this.leases.has(key)) {
      const now = Date.now();
      for (const [k, l] of this.leases) if (l.expiresAt <= now) this.leases.delete(k);
      if (this.leases.size >= MAX_LEASES) this.leases.delete(this.leases.keys().next().value!);
    }
    this.leases.delete(key);
    this.leases.set(key, lease);
  }
}

/** The refusal a remembered one stands for now: its Retry-After counts down with the window. */
function refusalLeft(lease: Lease): RateLimiterRes {
  const res = lease.refused!;
  return new RateLimiterRes(0, Math.max(0, lease.expiresAt - Date.now()), res.consumedPoints, false);
}

/**
 * The lease size for a limit of `points`: at most `max`, and at most a quarter of the budget, so that a
 * few instances' leases never hold the whole of a small limit; below 2, no lease (every point counted in Redis).
 */
export function leaseSize(points: number, max: number, share = 4): number {
  return Math.max(1, Math.min(max, Math.floor(points / share)));
}
