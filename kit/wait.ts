// Waiting, shared by the tests and the bench. Wait on a condition (waitFor) wherever there is one to
// observe; sleep is for pacing (load loops, a deliberate pause past a documented delay).

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls `probe` every `everyMs` until it returns true and resolves with the milliseconds it took. A probe
 * that throws counts as "not yet" (a server still starting refuses connections); the last such error is
 * part of the timeout message. `signal` ends the wait early with its reason (e.g. the process exited).
 */
export async function waitFor(
  what: string,
  probe: () => Promise<boolean> | boolean,
  timeoutMs = 15_000,
  everyMs = 100,
  signal?: AbortSignal,
): Promise<number> {
  const started = Date.now();
  let lastError: unknown;
  for (;;) {
    signal?.throwIfAborted();
    try {
      if (await probe()) return Date.now() - started;
    } catch (error) {
      lastError = error;
    }
    signal?.throwIfAborted();
    if (Date.now() - started > timeoutMs) {
      const cause = lastError === undefined ? '' : ` (last error: ${lastError instanceof Error ? lastError.message : String(lastError)})`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${cause}`);
    }
    await sleep(everyMs);
  }
}

export class WaitTimeoutError extends Error {}

/**
 * Polls `check` until it returns a value other than undefined/false and resolves with that value, or
 * throws a WaitTimeoutError after `timeoutMs` naming `what` and the last error seen (so a failed wait says
 * what it was waiting for and why it never came). An error for which `fatal` says true ends the wait at
 * once (a process that died will not become ready: fail now, with its log, instead of at the deadline).
 */
export async function pollFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  { timeoutMs = 30_000, intervalMs = 100, fatal = () => false }: { timeoutMs?: number; intervalMs?: number; fatal?: (error: unknown) => boolean } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value as T;
      last = undefined;
    } catch (error) {
      if (fatal(error)) throw error;
      last = error;
    }
    if (Date.now() >= deadline) {
      const why = last instanceof Error ? `: last error: ${last.message}` : '';
      throw new WaitTimeoutError(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
    }
    await sleep(intervalMs);
  }
}
