// One client address may hold at most a small share of the argon2 queue (ARGON2_MAX_PER_ADDRESS credential
// checks queued or running in this process): beyond it the address gets 429 at once, so a burst from one
// address can never fill the queue and lock every other cold login out with 503s.
import { ServiceError } from '../errors.js';

export interface Argon2ShareOptions {
  /** ARGON2_MAX_PER_ADDRESS: credential checks one address may have queued or running. */
  maxPerAddress: number;
  /** Told of each request refused for going past it. */
  onRefusal: () => void;
}

export class Argon2Share {
  private readonly inFlight = new Map<string, number>();

  constructor(private readonly options: Argon2ShareOptions) {}

  /** Takes a slot for `address` or throws 429; the returned function gives it back (call it exactly once). */
  enter(address: string): () => void {
    const held = this.inFlight.get(address) ?? 0;
    if (held >= this.options.maxPerAddress) {
      this.options.onRefusal();
      throw new ServiceError('rate_limited', undefined, 1);
    }
    this.inFlight.set(address, held + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const now = (this.inFlight.get(address) ?? 1) - 1;
      if (now <= 0) this.inFlight.delete(address);
      else this.inFlight.set(address, now);
    };
  }
}
