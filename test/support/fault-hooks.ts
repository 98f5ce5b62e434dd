// Test-only: `node --import dist/test/support/fault-hooks.js dist/src/main.js` runs the service with the
// fault-injecting worker (fault-worker.ts) in place of the real one. Worker threads inherit --import, so
// this runs again in every thread, where Piscina loads the worker file: by require() first (Node 20 can
// require an ES module), then by import(). Both resolutions are redirected.
import { createRequire, register } from 'node:module';
import { fileURLToPath } from 'node:url';

register('./fault-loader.js', import.meta.url);

const REAL = fileURLToPath(new URL('../../workers/crypto-worker.js', import.meta.url));
const FAULTY = fileURLToPath(new URL('./fault-worker.js', import.meta.url));
const Module = createRequire(import.meta.url)('node:module') as { _resolveFilename: (request: string, ...rest: unknown[]) => string };
const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (request: string, ...rest: unknown[]) {
  const resolved = resolveFilename.call(this, request, ...rest);
  return resolved === REAL ? FAULTY : resolved;
};
