// The layers' import rules (docs/architecture.md), checked on the source: every relative and package import
// of src/, workers/ and the workspace packages (packages/*/src) is read with the TypeScript parser and
// resolved to a file.
import { readdirSync, readFileSync, statSync, existsSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

interface Edge {
  from: string;
  to: string;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir)).flatMap((name) => {
    const rel = path.posix.join(dir, name);
    if (statSync(path.join(ROOT, rel)).isDirectory()) return sourceFiles(rel);
    return rel.endsWith('.ts') && !rel.endsWith('.d.ts') ? [rel] : [];
  });
}

/** Imports of one file: project files (resolved, repo-relative) and bare specifiers (packages, node:). */
function importsOf(file: string): { files: string[]; packages: string[] } {
  const info = ts.preProcessFile(readFileSync(path.join(ROOT, file), 'utf8'), true, true);
  const files: string[] = [];
  const packages: string[] = [];
  for (const { fileName } of info.importedFiles) {
    if (!fileName.startsWith('.')) {
      packages.push(fileName);
      continue;
    }
    const joined = path.posix.normalize(path.posix.join(path.posix.dirname(file), fileName));
    const candidates = [joined.replace(/\.js$/, '.ts'), joined, `${joined}.ts`, `${joined}/index.ts`];
    files.push(candidates.find((c) => existsSync(path.join(ROOT, c))) ?? joined);
  }
  return { files, packages };
}

const SERVICE_FILES = [...sourceFiles('src'), ...sourceFiles('workers')];
const PACKAGES = ['protocol', 'middleware', 'client'];
const PACKAGE_FILES = PACKAGES.flatMap((name) => sourceFiles(`packages/${name}/src`));
const FILES = [...SERVICE_FILES, ...PACKAGE_FILES];
const GRAPH = new Map(FILES.map((file) => [file, importsOf(file)]));
const EDGES: Edge[] = [...GRAPH].flatMap(([from, { files }]) => files.map((to) => ({ from, to })));

const MIDDLEWARE = '@agent-credential-exchange/middleware';
const PROTOCOL = '@agent-credential-exchange/protocol';
const OURS = /^@agent-credential-exchange\//;

/** The layer a file belongs to: core, adapters/<name>, app, config, support, cli, workers, main, packages/<name>. */
function layer(file: string): string {
  const parts = file.split('/');
  if (parts[0] === 'workers') return 'workers';
  if (parts[0] === 'packages') return `packages/${parts[1]}`;
  if (parts[1] === 'adapters') return `adapters/${parts[2]}`;
  if (parts[1] === 'main.ts') return 'main';
  return parts[1]!;
}

/** What each layer may import (besides itself). */
function allowed(from: string, to: string): boolean {
  const a = layer(from);
  const b = layer(to);
  if (a === b) return true;
  // A workspace package reaches another one by its package name only (checked below), never by a path.
  if (a.startsWith('packages/') || b.startsWith('packages/')) return false;
  switch (a) {
    case 'core':
    case 'support':
    case 'workers':
      return false;
    case 'config':
    case 'cli':
      return b === 'support';
    case 'main':
    case 'app':
      return b !== 'main' && b !== 'cli';
    default:
      if (!a.startsWith('adapters/')) return false;
      // An adapter uses the core and support; another adapter only through its public face (index.ts),
      // and the crypto adapter its worker threads.
      if (b === 'core' || b === 'support') return true;
      if (a === 'adapters/crypto' && b === 'workers') return true;
      return b.startsWith('adapters/') && to === `src/${b}/index.ts`;
  }
}

/** Packages the core may use: computation only, no I/O and no infrastructure. */
const CORE_PACKAGES = new Set(['node:crypto']);

/** Packages the protocol package may use: the scope file's schema is a TypeBox schema. */
const PROTOCOL_PACKAGES = new Set(['@sinclair/typebox']);

/** The source file of an entry of the protocol package (`@agent-credential-exchange/protocol/<entry>`), from its exports map. */
function protocolEntry(specifier: string): string | undefined {
  const manifest = JSON.parse(readFileSync(path.join(ROOT, 'packages/protocol/package.json'), 'utf8')) as { exports: Record<string, { default?: string }> };
  const target = manifest.exports[`.${specifier.slice(PROTOCOL.length)}`]?.default;
  return target?.startsWith('./dist/') ? `packages/protocol/src/${target.slice('./dist/'.length).replace(/\.js$/, '.ts')}` : undefined;
}

/** Every package a protocol module reaches, its own imports followed. */
function packagesReached(file: string, seen = new Set<string>()): string[] {
  if (seen.has(file)) return [];
  seen.add(file);
  const imports = GRAPH.get(file);
  if (!imports) return [`${file} (not a protocol source file)`];
  return [...imports.packages, ...imports.files.flatMap((to) => packagesReached(to, seen))];
}

/**
 * The core may import an entry of the protocol package (the wire formats it produces: the feed document, the
 * resource identifier's normal form) when that entry reaches no package at all: plain computation, no I/O,
 * the same rule as the core's own files. The schema entry (TypeBox) is for the adapters.
 */
function corePackageAllowed(specifier: string): boolean {
  if (CORE_PACKAGES.has(specifier)) return true;
  if (!specifier.startsWith(`${PROTOCOL}/`)) return false;
  const entry = protocolEntry(specifier);
  return entry !== undefined && packagesReached(entry).length === 0;
}

describe('architecture: import rules', () => {
  it('reads a realistic graph (the check would see a violation)', () => {
    expect(FILES.length).toBeGreaterThan(50);
    expect(EDGES.some((e) => layer(e.from) === 'app' && layer(e.to).startsWith('adapters/'))).toBe(true);
    expect(allowed('src/core/tokens/token-service.ts', 'src/adapters/crypto/pools.ts')).toBe(false);
    expect(allowed('src/adapters/http/server.ts', 'src/adapters/crypto/pools.ts')).toBe(false);
    expect(allowed('src/adapters/http/server.ts', 'src/adapters/crypto/index.ts')).toBe(true);
    expect(allowed('src/core/platforms/platform-service.ts', 'packages/protocol/src/resource-identifier.ts')).toBe(false);
    expect(allowed('packages/middleware/src/verifier.ts', 'packages/protocol/src/resource-identifier.ts')).toBe(false);
    expect(PACKAGE_FILES.filter((f) => f.startsWith('packages/protocol/')).length).toBeGreaterThan(3);
    expect(corePackageAllowed(`${PROTOCOL}/resource-identifier`)).toBe(true);
    expect(corePackageAllowed(`${PROTOCOL}/feed-document`)).toBe(true);
    expect(corePackageAllowed(`${PROTOCOL}/scopes-file`)).toBe(false); // TypeBox
    expect(corePackageAllowed(MIDDLEWARE)).toBe(false);
  });

  it('every import resolves to a file', () => {
    expect(EDGES.filter((e) => !existsSync(path.join(ROOT, e.to)))).toEqual([]);
  });

  it('the core imports nothing outside itself (and no package but node:crypto and the pure entries of the protocol package)', () => {
    const outside = EDGES.filter((e) => layer(e.from) === 'core' && layer(e.to) !== 'core');
    const packages = [...GRAPH]
      .filter(([file]) => layer(file) === 'core')
      .flatMap(([file, { packages }]) => packages.filter((p) => !corePackageAllowed(p)).map((p) => `${file} -> ${p}`));
    expect(outside).toEqual([]);
    expect(packages).toEqual([]);
  });

  it('the revocation feed has one home per layer, each under the one name "revocation"', () => {
    // The core: the log, the feed credentials and the transmitter (streams, SET signing, delivery).
    const core = FILES.filter((file) => file.startsWith('src/core/revocation/'));
    expect(core).toEqual(
      expect.arrayContaining(['revocation-service.ts', 'feed-credential-service.ts', 'stream.ts', 'set-signing.ts', 'transmitter.ts'].map((name) => `src/core/revocation/${name}`)),
    );
    // It imports only the core, and of packages node:crypto and the pure entries of the protocol package (the feed document).
    expect(EDGES.filter((e) => core.includes(e.from) && !e.to.startsWith('src/core/')).map((e) => `${e.from} -> ${e.to}`)).toEqual([]);
    expect(core.flatMap((file) => GRAPH.get(file)!.packages.filter((p) => !corePackageAllowed(p)).map((p) => `${file} -> ${p}`))).toEqual([]);
    // HTTP: the poll, the socket (with its topics and the feed's series) and the SSF configuration, in routes/.
    for (const name of ['revocation-poll.ts', 'revocation-socket.ts', 'revocation-topics.ts', 'revocation-metrics.ts', 'ssf.ts']) {
      expect(FILES).toContain(`src/adapters/http/routes/${name}`);
    }
    // Outside the core, the feed's core is used by the composition root, those routes and the admin API (feed credentials).
    const users = [...new Set(EDGES.filter((e) => e.to.startsWith('src/core/revocation/') && layer(e.from) !== 'core').map((e) => e.from))];
    const revocationRoute = (file: string) => /^src\/adapters\/http\/routes\/(revocation-[a-z-]+|ssf)\.ts$/.test(file);
    const adminApi = (file: string) => file.startsWith('src/adapters/http/routes/admin/');
    expect(users.filter((file) => layer(file) !== 'app' && !revocationRoute(file) && !adminApi(file))).toEqual([]);
    // No other name for it: no feed/ or revocation-feed/ folder, no revocation-routes file.
    expect(FILES.filter((file) => /\/(feed|revocation-feed)\//.test(file) || file.includes('revocation-routes'))).toEqual([]);
  });

  it('each layer imports only what its rules allow', () => {
    const broken = EDGES.filter((e) => !allowed(e.from, e.to)).map((e) => `${e.from} -> ${e.to}`);
    expect(broken).toEqual([]);
  });

  it('no file of src/, workers/ or packages/ imports the middleware but the middleware itself', () => {
    const importers = [...GRAPH]
      .filter(([file]) => layer(file) !== 'packages/middleware')
      .flatMap(([file, { files, packages }]) => [
        ...packages.filter((p) => p === MIDDLEWARE || p.startsWith(`${MIDDLEWARE}/`)).map((p) => `${file} -> ${p}`),
        ...files.filter((to) => layer(to) === 'packages/middleware').map((to) => `${file} -> ${to}`),
      ]);
    expect(importers).toEqual([]);
  });

  it('the protocol package imports nothing of ours, and no package but TypeBox', () => {
    const protocolFiles = [...GRAPH].filter(([file]) => layer(file) === 'packages/protocol');
    const ours = protocolFiles.flatMap(([file, { files, packages }]) => [
      ...packages.filter((p) => OURS.test(p) || !PROTOCOL_PACKAGES.has(p)).map((p) => `${file} -> ${p}`),
      ...files.filter((to) => layer(to) !== 'packages/protocol').map((to) => `${file} -> ${to}`),
    ]);
    expect(protocolFiles.length).toBeGreaterThan(3);
    expect(ours).toEqual([]);
  });

  it('the service and the middleware reach the protocol through its exports map (each entry one it declares)', () => {
    const entries = [...GRAPH].flatMap(([file, { packages }]) => packages.filter((p) => p.startsWith(`${PROTOCOL}/`) || p === PROTOCOL).map((p) => [file, p, protocolEntry(p)]));
    expect(entries.filter(([, , entry]) => entry === undefined || !GRAPH.has(entry))).toEqual([]);
    // The service and the middleware both use it (else the check above would pass on nothing).
    expect(new Set(entries.map(([file]) => (file!.startsWith('src/') ? 'service' : layer(file!))))).toEqual(new Set(['service', 'packages/middleware']));
  });

  it('has no import cycle', () => {
    // Tarjan's strongly connected components: any component of more than one file is a cycle.
    const index = new Map<string, number>();
    const low = new Map<string, number>();
    const stack: string[] = [];
    const onStack = new Set<string>();
    const cycles: string[][] = [];
    let next = 0;
    const visit = (v: string): void => {
      index.set(v, next);
      low.set(v, next++);
      stack.push(v);
      onStack.add(v);
      for (const w of GRAPH.get(v)?.files ?? []) {
        if (!GRAPH.has(w)) continue;
        if (!index.has(w)) {
          visit(w);
          low.set(v, Math.min(low.get(v)!, low.get(w)!));
        } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
      if (low.get(v) === index.get(v)) {
        const component: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          onStack.delete(w);
          component.push(w);
        } while (w !== v);
        if (component.length > 1) cycles.push(component.sort());
      }
    };
    for (const file of FILES) if (!index.has(file)) visit(file);
    expect(cycles).toEqual([]);
  });
});
