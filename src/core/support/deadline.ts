// Bounds on waits: a store that does not answer must not hang a request, a start-up or a readiness check.
import { StoreUnavailableError } from '../errors.js';

/** Races `promise` against a deadline so a hung store becomes a prompt StoreUnavailableError. */
export function withTimeout<T>(store: string, promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StoreUnavailableError(store, new Error(`no answer within ${ms} ms`))), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** Resolves with `promise`'s value, or with `false` once `ms` have passed (the timer never keeps Node alive). */
export function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T | false> {
  return Promise.race([promise, new Promise<false>((resolve) => setTimeout(() => resolve(false), ms).unref())]);
}
