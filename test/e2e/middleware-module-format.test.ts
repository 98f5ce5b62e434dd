// The packed middleware and client are ESM only and declare the Node versions where
// `require(esm)` works; on the lowest one declared (a Node binary of that exact version, from the npm
// registry, cached in $TMPDIR) a CommonJS app `require()`s the middleware's entry points and the client.
// Every error class the README's table names is exported from both middleware entries, and the edge
// entry's import graph names no `node:` module, no `ws` and no code evaluated from strings, and reaches no
// jose module that uses CompressionStream (edge bundlers warn about it).
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';

const exec = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');
const PKG = path.join(ROOT, 'packages/middleware');
const NPM_FLAGS = ['--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'];
const work = mkdtempSync(path.join(os.tmpdir(), 'ace-module-format-'));
const manifest = JSON.parse(readFileSync(path.join(PKG, 'package.json'), 'utf8')) as { engines: { node: string }; type: string };
const CLIENT = path.join(ROOT, 'packages/client');
const clientManifest = JSON.parse(readFileSync(path.join(CLIENT, 'package.json'), 'utf8')) as { engines: { node: string }; type: string };
const readme = readFileSync(path.join(PKG, 'README.md'), 'utf8');
let app: string;
let lowestNode: string;

beforeAll(async () => {
  const { stdout } = await exec('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], { cwd: PKG });
  const client = await exec('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], { cwd: CLIENT });
  app = path.join(work, 'app');
  mkdirSync(app);
  writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'cjs-app', version: '1.0.0', private: true }));
  const tarballs = [stdout, client.stdout].map((out) => path.join(work, JSON.parse(out)[0].filename));
  const installing = exec('npm', ['install', ...NPM_FLAGS, ...tarballs], { cwd: app, timeout: 240_000 });
  const lowest = /^\^(\d+\.\d+\.\d+)/.exec(manifest.engines.node)![1]!;
  const pkg = `node-${process.platform}-${process.arch}`;
  const cache = path.join(os.tmpdir(), `ace-node-${lowest}`);
  lowestNode = path.join(cache, 'node_modules', pkg, 'bin/node');
  if (!existsSync(lowestNode)) {
    // Installed beside the cache and renamed into place: a run at the same time (the other Node line in CI)
    // never sees a half-installed binary.
    const partial = `${cache}.${process.pid}.partial`;
    rmSync(partial, { recursive: true, force: true });
    await exec('npm', ['install', ...NPM_FLAGS, '--no-save', '--no-package-lock', '--prefix', partial, `${pkg}@${lowest}`], { timeout: 240_000 });
    try {
      renameSync(partial, cache);
    } catch (error) {
      if (!existsSync(lowestNode)) throw new Error(`${cache} holds an unfinished install: remove it (${(error as Error).message})`);
      rmSync(partial, { recursive: true, force: true });
    }
  }
  await installing;
}, 300_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

it('is ESM only with engines where require(esm) is on by default (middleware and client)', () => {
  for (const pkg of [manifest, clientManifest]) {
    expect(pkg.type).toBe('module');
    expect(pkg.engines.node).toBe('^20.19.0 || >=22.12.0');
  }
  expect(readFileSync(path.join(CLIENT, 'README.md'), 'utf8')).toContain('^20.19.0 || >=22.12.0');
});

it('a CommonJS app require()s both entry points on the lowest Node declared', { timeout: 60_000 }, async () => {
  const errorClasses = [...readme.matchAll(/^\| `(\w+Error)` \|/gm)].map((m) => m[1]!);
  expect(errorClasses).toEqual(expect.arrayContaining(['ScopeFileError', 'JwksUnavailableError', 'UnknownKeyError', 'DocumentRejectedError']));
  writeFileSync(
    path.join(app, 'check.cjs'),
    `const node = require('@agent-credential-exchange/middleware');
const edge = require('@agent-credential-exchange/middleware/edge');
const { AgentClient } = require('@agent-credential-exchange/client');
const scopesDocument = { schema: 'SvcScopesYaml', version: 1, platform_id: '8d7b4f2e-3c1a-4e5b-9f60-1a2b3c4d5e6f', scopes: [], routes: [] };
const verifier = node.createVerifier({ serviceUrl: 'http://127.0.0.1:9', scopesDocument, revocationFeed: false });
let refused = '';
try { edge.createVerifier({ serviceUrl: 'http://127.0.0.1:9', scopesYaml: 'schema: nope' }); } catch (e) { refused = e.code; }
const exported = ${JSON.stringify(errorClasses)}.map((name) => [name, typeof node[name], typeof edge[name], new node[name]('x') instanceof Error]);
console.log(JSON.stringify({ version: process.version, platform: verifier.platformId, refused, exported, fetchAdapter: typeof edge.withAgentAuth, client: typeof AgentClient }));
`,
  );
  const { stdout } = await exec(lowestNode, ['check.cjs'], { cwd: app });
  const result = JSON.parse(stdout) as { version: string; platform: string; refused: string; exported: unknown[]; fetchAdapter: string; client: string };
  expect(result.client).toBe('function');
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

it("the edge entry's import graph, jose included, reaches no module that uses CompressionStream", () => {
  const nodeModules = path.join(app, 'node_modules');
  const jose = path.join(nodeModules, 'jose');
  const joseExports = (JSON.parse(readFileSync(path.join(jose, 'package.json'), 'utf8')) as { exports: Record<string, string | { default: string }> }).exports;
  // The package's exports map, as Node applies it (the `default` condition; `*` patterns).
  const resolveJose = (specifier: string): string => {
    const subpath = `.${specifier.slice('jose'.length)}`;
    for (const [key, target] of Object.entries(joseExports)) {
      const file = typeof target === 'string' ? target : target.default;
      const star = key.indexOf('*');
      if (star < 0 ? key === subpath : subpath.startsWith(key.slice(0, star)) && subpath.endsWith(key.slice(star + 1))) {
        return path.join(jose, star < 0 ? file : file.replace('*', subpath.slice(star, subpath.length - (key.length - star - 1))));
      }
    }
    throw new Error(`jose does not export ${specifier}`);
  };
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    expect([file, text.includes('CompressionStream')]).toEqual([file, false]);
    for (const [, specifier] of text.matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)) {
      if (specifier!.startsWith('.')) visit(path.resolve(path.dirname(file), specifier!));
      else if (specifier === 'jose' || specifier!.startsWith('jose/')) visit(resolveJose(specifier!));
    }
  };
  visit(path.join(nodeModules, '@agent-credential-exchange/middleware/dist/edge.js'));
  expect([...seen].some((f) => f.includes(`${path.sep}jose${path.sep}`) && f.endsWith(`jwt${path.sep}verify.js`))).toBe(true);
});

it('the generated validator is current with the schema (npm run build in packages/protocol regenerates it)', async () => {
  const protocol = path.join(ROOT, 'packages/protocol');
  await exec(process.execPath, [path.join(protocol, 'scripts/generate-validators.mjs'), '--check'], { cwd: protocol });
});
