// Puts the protocol package (packages/protocol: the feed document, the scope file's schema and validator,
// the resource identifier) inside this package's dist, so that the published middleware is self-contained:
// @agent-credential-exchange/protocol is a private workspace package, never published, never a dependency
// of the tarball. Runs after tsc in `npm run build` (the root build builds packages/protocol first):
//   1. copies packages/protocol/dist (JavaScript and declarations, no source maps) to dist/protocol/;
//   2. rewrites each `@agent-credential-exchange/protocol/<entry>` specifier of dist/**/*.js and *.d.ts to
//      the relative path of that entry's copy (the entry's file from the protocol's exports map);
//   3. fails when any file of dist still names the protocol package.
// test/e2e/packages.test.ts installs the packed tarball on its own and checks that it never names it.
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const NAME = '@agent-credential-exchange/protocol';
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist');
const protocol = path.dirname(fileURLToPath(import.meta.resolve(`${NAME}/package.json`)));
const manifest = JSON.parse(readFileSync(path.join(protocol, 'package.json'), 'utf8'));
const copy = path.join(dist, 'protocol');

if (!existsSync(path.join(protocol, 'dist'))) throw new Error(`bundle-protocol: ${protocol}/dist is missing: build packages/protocol first`);

/** Files under dir (absolute paths). */
const filesOf = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    return statSync(file).isDirectory() ? filesOf(file) : [file];
  });

rmSync(copy, { recursive: true, force: true });
cpSync(path.join(protocol, 'dist'), copy, { recursive: true, filter: (file) => statSync(file).isDirectory() || /\.(js|d\.ts)$/.test(file) });
// The copies' maps would point at sources the tarball does not hold.
for (const file of filesOf(copy)) {
  writeFileSync(file, readFileSync(file, 'utf8').replace(/\n\/\/# sourceMappingURL=\S+\s*$/, '\n'));
}

/** dist/protocol/<file> of an entry `./<entry>` of the protocol's exports map. */
function entryFile(entry) {
  const target = manifest.exports[`./${entry}`];
  const file = typeof target === 'object' && target !== null ? target.default : undefined;
  if (typeof file !== 'string' || !file.startsWith('./dist/')) throw new Error(`bundle-protocol: ${NAME} exports no ./${entry}`);
  return path.join(copy, file.slice('./dist/'.length));
}

const SPECIFIER = new RegExp(`(['"])${NAME.replace('/', '\\/')}/([A-Za-z0-9_-]+)\\1`, 'g');
for (const file of filesOf(dist)) {
  if (file.startsWith(copy + path.sep) || !/\.(js|d\.ts)$/.test(file)) continue;
  const text = readFileSync(file, 'utf8');
  const rewritten = text.replace(SPECIFIER, (_match, quote, entry) => {
    let relative = path.relative(path.dirname(file), entryFile(entry)).split(path.sep).join('/');
    if (!relative.startsWith('.')) relative = `./${relative}`;
    return `${quote}${relative}${quote}`;
  });
  if (rewritten !== text) writeFileSync(file, rewritten);
}

const left = filesOf(dist).filter((file) => /\.(js|d\.ts)$/.test(file) && readFileSync(file, 'utf8').includes(NAME));
if (left.length > 0) throw new Error(`bundle-protocol: still naming ${NAME}: ${left.map((f) => path.relative(root, f)).join(', ')}`);
