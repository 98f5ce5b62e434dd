// Issue #24 item 3: the packed middleware is ESM only and declares the Node versions where `require(esm)`
// works; on the lowest one declared (a Node binary of that exact version, from the npm registry, cached
// in $TMPDIR) a CommonJS app `require()`s both entry points. Every error class the README's table names
// is exported from both, and the edge entry's import graph names no `node:` module, no `ws` and no
// code evaluated from strings.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';

const exec = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');
const PKG = path.join(ROOT, 'packages/middleware');
const NPM_FLAGS = ['--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'];
const work = mkdtempSync(path.join(os.tmpdir(), 'ace-module-format-'));
const manifest = JSON.parse(readFileSync(path.join(PKG, 'package.json'), 'utf8')) as { engines: { node: string }; type: string };
const readme = readFileSync(path.join(PKG, 'README.md'), 'utf8');
let app: string;
let lowestNode: string;

beforeAll(async () => {
  const { stdout } = await exec('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], { cwd: PKG });
  app = path.join(work, 'app');
  mkdirSync(app);
  writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'cjs-app', version: '1.0.0', private: true }));
  const installing = exec('npm', ['install', ...NPM_FLAGS, path.join(work, JSON.parse(stdout)[0].filename)], { cwd: app, timeout: 240_000 });
  const lowest = /^\^(\d+\.\d+\.\d+)/.exec(manifest.engines.node)![1]!;
  const pkg = `node-${process.platform}-${process.arch}`;
  const cache = path.join(os.tmpdir(), `ace-node-${lowest}`);
  lowestNode = path.join(cache, 'node_modules', pkg, 'bin/node');
  if (!existsSync(lowestNode)) {
    await exec('npm', ['install', ...NPM_FLAGS, '--no-save', '--no-package-lock', '--prefix', cache, `${pkg}@${lowest}`], { timeout: 240_000 });
  }
  await installing;
}, 300_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

it('is ESM only with engines where require(esm) is on by default', () => {
  expect(manifest.type).toBe('module');
  expect(manifest.engines.node).toBe('^20.19.0 || >=22.12.0');
});

it('a CommonJS app require()s both entry points on the lowest Node declared', { timeout: 60_000 }, async () => {
  const errorClasses = [...readme.matchAll(/^\| `(\w+Error)` \|/gm)].map((m) => m[1]!);
  expect(errorClasses).toEqual(expect.arrayContaining(['ScopeFileError', 'JwksUnavailableError', 'UnknownKeyError', 'DocumentRejectedError']));
  writeFileSync(
    path.join(app, 'check.cjs'),
    `const node = require('@agent-credential-exchange/middleware');
const edge = require('@agent-credential-exchange/middleware/edge');
const scopesDocument = { schema: 'SvcScopesYaml', version: 1, platform_id: '8d7b4f2e-3c1a-4e5b-9f60-1a2b3c4d5e6f', scopes: [], routes: [] };
const verifier = node.createVerifier({ serviceUrl: 'http://127.0.0.1:9', scopesDocument, revocationFeed: false });
let refused = '';
try { edge.createVerifier({ serviceUrl: 'http://127.0.0.1:9', scopesYaml: 'schema: nope' }); } catch (e) { refused = e.code; }
const exported = ${JSON.stringify(errorClasses)}.map((name) => [name, typeof node[name], typeof edge[name], new node[name]('x') instanceof Error]);
console.log(JSON.stringify({ version: process.version, platform: verifier.platformId, refused, exported, fetchAdapter: typeof edge.withAgentAuth }));
`,
  );
  const { stdout } = await exec(lowestNode, ['check.cjs'], { cwd: app });
  const result = JSON.parse(stdout) as { version: string; platform: string; refused: string; exported: unknown[]; fetchAdapter: string };
  expect(result.version).toBe(`v${/^\^(\d+\.\d+\.\d+)/.exec(manifest.engines.node)![1]}`);
  expect(result.platform).toBe('8d7b4f2e-3c1a-4e5b-9f60-1a2b3c4d5e6f');
  expect(result.refused).toBe('ERR_ACE_SCOPE_FILE');
  expect(result.fetchAdapter).toBe('function');
  expect(result.exported).toEqual(errorClasses.map((name) => [name, 'function', 'function', true]));
});

it("the edge entry's own modules import no node: module, no ws, and generate no code", () => {
  const dist = path.join(app, 'node_modules/@agent-credential-exchange/middleware/dist');
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    expect([file, /new Function|\beval\(/.test(text)]).toEqual([file, false]);
    for (const [, specifier] of text.matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)) {
      expect([file, specifier]).not.toEqual([file, expect.stringMatching(/^(node:|ws$|fs$|path$|http$|ajv)/)]);
      if (specifier!.startsWith('.')) visit(path.resolve(path.dirname(file), specifier!));
    }
  };
  visit(path.join(dist, 'edge.js'));
  expect(seen.size).toBeGreaterThan(8);
  expect([...seen].some((f) => f.endsWith('validate-scopes-file.js'))).toBe(true);
});

it('the generated validator is current with the schema (npm run build regenerates it)', async () => {
  await exec(process.execPath, [path.join(PKG, 'scripts/generate-validators.mjs'), '--check'], { cwd: PKG });
});
