// Patches the `postgres` driver (3.4.9, the latest release) against a crash that takes the whole service
// down during a Postgres switchover (seen in test/e2e/postgres-failover.test.ts on a loaded machine):
//
//   TypeError: Cannot read properties of null (reading 'write')
//       at Immediate.nextWrite (node_modules/postgres/src/connection.js:255)
//
// A small write is deferred to a setImmediate; when the connection closes first, `closed()` sets the
// socket to null, and the deferred write (or one made after the close) dereferences it from a timer
// callback, where nothing can catch it. Reported upstream as porsager/postgres#1066, #1154 and #1208
// (fixes proposed in #1168, #1176, #1209; none released). Two changes, the second from the same analysis:
//   1. nextWrite() with no socket drops the bytes and settles what waited on them with CONNECTION_CLOSED
//      (the store turns that into 503 + Retry-After), instead of throwing;
//   2. closed() and terminate() forget the pending write (timer and bytes) after clearing its timer, so a
//      reconnected socket never starts with another connection's bytes or with a timer that never fires.
//
// Run by `postinstall` (npm ci) and by the Dockerfile (which installs with --ignore-scripts). Idempotent.
// It fails loudly when the driver's code is not the one this patch was written for: look whether the
// new release fixed it (then delete this script and its two callers) or adapt the patch.
// `node scripts/patch-postgres-driver.mjs --check` only reports whether every copy is patched.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const MARKER = '/* ace: patched by scripts/patch-postgres-driver.mjs */';
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// Where Node would find it from here: ./node_modules in this repository, the project's hoisted
// node_modules when this package is installed from its tarball (npm runs this script there too).
const driver =
  (createRequire(path.join(root, 'package.json')).resolve.paths('postgres') ?? [])
    .map((dir) => path.join(dir, 'postgres'))
    .find((dir) => existsSync(path.join(dir, 'package.json'))) ?? path.join(root, 'node_modules', 'postgres');
// The ESM build (what the service loads), the CommonJS and the Cloudflare builds.
const COPIES = ['src/connection.js', 'cjs/src/connection.js', 'cf/src/connection.js'];

const edits = [
  {
    what: 'nextWrite() without a socket',
    from: '  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)\n',
    to:
      '  function nextWrite(fn) {\n' +
      `    ${MARKER}\n` +
      '    if (!socket) {\n' +
      '      nextWriteTimer !== null && clearImmediate(nextWriteTimer)\n' +
      '      chunk = nextWriteTimer = null\n' +
      "      error(Errors.connection('CONNECTION_CLOSED', options, socket))\n" +
      '      return false\n' +
      '    }\n' +
      '    const x = socket.write(chunk, fn)\n',
  },
  {
    what: 'terminate() forgets the pending write',
    from: "    clearImmediate(nextWriteTimer)\n    if (socket) {\n",
    to: "    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null\n    if (socket) {\n",
  },
  {
    what: 'closed() forgets the pending write',
    from: '    incomings = null\n    clearImmediate(nextWriteTimer)\n    socket.removeListener',
    to: '    incomings = null\n    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null\n    socket.removeListener',
  },
];

function main() {
  const checkOnly = process.argv.includes('--check');
  if (!existsSync(driver)) {
    console.log('patch-postgres-driver: node_modules/postgres is not installed; nothing to patch');
    return;
  }
  const { version } = JSON.parse(readFileSync(path.join(driver, 'package.json'), 'utf8'));
  let unpatched = 0;
  for (const copy of COPIES) {
    const file = path.join(driver, copy);
    if (!existsSync(file)) continue;
    const source = readFileSync(file, 'utf8');
    if (source.includes(MARKER)) continue;
    if (checkOnly) {
      console.error(`patch-postgres-driver: postgres@${version} ${copy} is not patched`);
      unpatched++;
      continue;
    }
    let patched = source;
    for (const edit of edits) {
      if (patched.split(edit.from).length !== 2) {
        throw new Error(
          `patch-postgres-driver: postgres@${version} ${copy}: the code for "${edit.what}" is not the one this patch was written for (3.4.9). ` +
            'See the header of scripts/patch-postgres-driver.mjs.',
        );
      }
      patched = patched.replace(edit.from, edit.to);
    }
    writeFileSync(file, patched);
    console.log(`patch-postgres-driver: postgres@${version} ${copy} patched`);
  }
  if (unpatched > 0) process.exit(1);
}

main();
