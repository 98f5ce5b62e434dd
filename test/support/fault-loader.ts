// Test-only module hook (see fault-hooks.ts): resolves the crypto worker to the fault-injecting one,
// except for the fault worker's own import of the real worker.
const REAL = '/dist/workers/crypto-worker.js';
const FAULTY = new URL('./fault-worker.js', import.meta.url).href;

interface Resolved {
  url: string;
  format?: string | null;
  shortCircuit?: boolean;
}
type NextResolve = (specifier: string, context: { parentURL?: string }) => Promise<Resolved>;

export async function resolve(specifier: string, context: { parentURL?: string }, next: NextResolve): Promise<Resolved> {
  const resolved = await next(specifier, context);
  if (resolved.url.endsWith(REAL) && context.parentURL !== FAULTY) return { ...resolved, url: FAULTY };
  return resolved;
}
