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
