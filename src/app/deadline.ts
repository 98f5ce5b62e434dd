// A bound on a start-up or readiness wait: a store that does not answer must not hang the process.

/** Resolves with `promise`'s value, or with `false` once `ms` have passed (the timer never keeps Node alive). */
export function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T | false> {
  return Promise.race([promise, new Promise<false>((resolve) => setTimeout(() => resolve(false), ms).unref())]);
}
