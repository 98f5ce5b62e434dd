// The embedded default's first start unpacks the build's pristine cluster instead of running initdb
// (src/adapters/postgres/embedded/pristine-cluster.ts). Here with a small stand-in archive: which data
// directories get it, and that an interrupted earlier attempt or someone else's files are handled.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tar from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgliteVersion, pristineArchivePath, seedCluster, seedClusterInChild } from '../../src/adapters/postgres/embedded/pristine-cluster.js';

let root: string;
let archive: string;

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'ace-pristine-unit-'));
  const cluster = path.join(root, 'cluster');
  mkdirSync(path.join(cluster, 'base', '1'), { recursive: true, mode: 0o700 });
  writeFileSync(path.join(cluster, 'PG_VERSION'), '18\n', { mode: 0o600 });
  writeFileSync(path.join(cluster, 'base', '1', '1259'), Buffer.alloc(8192, 7), { mode: 0o600 });
  archive = path.join(root, 'pristine.tar.gz');
  await tar.c({ file: archive, gzip: true, cwd: cluster, portable: true }, readdirSync(cluster));
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('seedCluster', () => {
  it('unpacks the archive into a missing data directory, then leaves it alone', async () => {
    const dir = path.join(root, 'missing', 'pglite');
    mkdirSync(path.dirname(dir));
    expect(await seedCluster(dir, archive)).toBe('seeded');
    expect(readFileSync(path.join(dir, 'PG_VERSION'), 'utf8')).toBe('18\n');
    expect(readFileSync(path.join(dir, 'base', '1', '1259'))).toEqual(Buffer.alloc(8192, 7));
    expect(statSync(dir).mode & 0o077).toBe(0); // Postgres refuses a data directory others can read
    expect(existsSync(`${dir}.seeding`)).toBe(false);
    writeFileSync(path.join(dir, 'PG_VERSION'), '18\n# in use\n');
    expect(await seedCluster(dir, archive)).toBe('existing');
    expect(readFileSync(path.join(dir, 'PG_VERSION'), 'utf8')).toBe('18\n# in use\n');
  });

  it('fills an empty data directory and replaces what an interrupted attempt left beside it', async () => {
    const dir = path.join(root, 'empty', 'pglite');
    mkdirSync(dir, { recursive: true });
    mkdirSync(`${dir}.seeding/base`, { recursive: true });
    writeFileSync(`${dir}.seeding/PG_VERSION`, 'half');
    expect(await seedCluster(dir, archive)).toBe('seeded');
    expect(readFileSync(path.join(dir, 'PG_VERSION'), 'utf8')).toBe('18\n');
    expect(existsSync(`${dir}.seeding`)).toBe(false);
  });

  it("leaves a directory holding other files to PGlite's initdb, untouched", async () => {
    const dir = path.join(root, 'foreign', 'pglite');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'notes.txt'), 'mine');
    expect(await seedCluster(dir, archive)).toBe('initdb');
    expect(readdirSync(dir)).toEqual(['notes.txt']);
  });

  it("falls back to PGlite's initdb when there is no archive for this PGlite version", async () => {
    const dir = path.join(root, 'no-archive', 'pglite');
    expect(await seedCluster(dir, path.join(root, 'absent.tar.gz'))).toBe('initdb');
    expect(existsSync(dir)).toBe(false);
  });

  it('spawns no unpacking process for a restart or without an archive', async () => {
    // From the TypeScript sources there is no compiled child script: a spawn here would fail.
    const existing = path.join(root, 'missing', 'pglite');
    expect(await seedClusterInChild(existing, archive)).toBe('existing');
    expect(await seedClusterInChild(path.join(root, 'none', 'pglite'), path.join(root, 'absent.tar.gz'))).toBe('initdb');
  });

  it('names the archive by the installed PGlite version', () => {
    expect(pgliteVersion()).toMatch(/^\d+\.\d+\.\d+/);
    expect(path.basename(pristineArchivePath())).toBe(`pristine-cluster-${pgliteVersion()}.tar.gz`);
  });
});
