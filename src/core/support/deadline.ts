import { StoreUnavailableError } from '../errors.js';

/** Races `promise` against a deadline so a hung store becomes a prompt StoreUnavailableError. */
export function withTimeout<T>(store: string, promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StoreUnavailableError(store, new Error(`no answer within ${ms} ms`))), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
