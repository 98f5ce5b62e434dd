// The scope file read by clients we did not write: a YAML 1.2 reader (`yaml`) and a YAML 1.1 reader
// (PyYAML, Debian's python3-yaml) must both read exactly the document the service meant, whatever
// scope names (the pattern allows `yes`, `1:20`, `2001-12-14`, ...), descriptions and platform names
// an administrator chose.
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { renderScopeFile } from '../../src/adapters/http/scope-file-text.js';
import { inProcessApp, type InProcessApp } from '../support/in-process.js';
import { missingOutsideCi } from '../support/tools.js';

const PY_READER = [
  'import sys, json, yaml',
  'doc = yaml.safe_load(sys.stdin.buffer.read())',
  // Anything that is not JSON (a date, a set) shows up as its repr and fails the comparison.
  'print(json.dumps(doc, default=lambda o: "<" + type(o).__name__ + " " + repr(o) + ">"))',
].join('\n');
// The python3 on PATH (may be a pyenv or venv one), else the system's, where Debian's python3-yaml lives.
const python = ['python3', '/usr/bin/python3'].find((bin) => spawnSync(bin, ['-c', 'import yaml'], { stdio: 'ignore' }).status === 0);
const hasPyYaml = python !== undefined;

/** PyYAML's reading of `text`, as JSON. */
function readWithPyYaml(text: string): unknown {
  const run = spawnSync(python!, ['-c', PY_READER], { input: Buffer.from(text, 'utf8'), encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`PyYAML refused the file: ${run.stderr}`);
  return JSON.parse(run.stdout);
}

/** Every plain scalar a YAML 1.1 or 1.2 reader would turn into something other than this string. */
const TRICKY_NAMES = [
  'yes', 'no', 'on', 'off', 'y', 'n', 'Y', 'N', 'true', 'False', 'NULL', 'null',
  '1:20', '190:20:30', '2001-12-14', '2001-12-14t21:59:43.10', '1_000', '0x1F', '0o17', '017', '0b101',
  '1e3', '1.5', '.5', '.inf', '-.inf', '.NaN', '-', '_', 'a:b', '1:20.5',
];
const TRICKY_TEXT = [
  '', '~', 'yes', 'Off', '2001-12-14 21:59:43.10 -5', '1_000.5', '# not a comment', 'a: b', '- item', '[1, 2]',
  '{x: 1}', '&anchor', '*alias', '!tag', '|', '>', '"quoted"', "'single'", ' leading and trailing ',
  'tab\there', 'new\nline', 'carriage\rreturn', 'nel\u0085injected: 2', 'ls\u2028injected: 2', 'ps\u2029injected: 2',
  'del\u007fc1\u0090bom\ufeffend', 'unicode é ü 漢字 🎉', 'x'.repeat(1024),
];

const document = (platformId: string) => ({
  schema: 'SvcScopesYaml',
  version: 1,
  platform_id: platformId,
  scopes: TRICKY_NAMES.map((name, i) => ({ name, description: TRICKY_TEXT[i % TRICKY_TEXT.length] })),
  routes: [
    { method: 'GET', path: '/2001-12-14/{id}', scopes: ['yes', '1:20'] },
    { method: 'POST', path: '/on', scopes: ['1_000', 'null'] },
  ],
});

describe('scope file text (in process)', () => {
  const platformId = '6f1c7f0e-1d2b-4c3a-9e8f-0a1b2c3d4e5f';
  const meant = document(platformId);
  const text = renderScopeFile('B\u0085injected: 2 #\u2028more: 3\u2029x: 1\r\ny: 2', meant);

  it('contains no raw NEL, LS, PS, C1 control or BOM, and a one-line header comment', () => {
    expect(text).not.toMatch(/[\u007f-\u009f\u2028\u2029\ufeff]/);
    expect(text.split('\n')[0]).toMatch(/^# SvcScopesYaml v1 for platform ".*"\. Place in the project root\.$/);
  });

  it('reads the same in the YAML 1.2 reader (also under its 1.1 schema)', () => {
    expect(parseYaml(text)).toEqual(meant);
    expect(parseYaml(text, { version: '1.1' })).toEqual(meant);
  });

  it.skipIf(missingOutsideCi(!hasPyYaml, 'PyYAML (apt-get install -y python3-yaml), in CI a failure'))('reads the same in PyYAML (YAML 1.1)', () => {
    expect(readWithPyYaml(text)).toEqual(meant);
  });
});

describe('scope file served over HTTP', () => {
  let service: InProcessApp;
  let admin: InProcessApp['admin'];
  beforeAll(async () => {
    service = await inProcessApp();
    admin = service.admin;
  });
  afterAll(async () => {
    await service?.close();
  });

  it('is read identically by PyYAML and by `yaml`, with a platform name that tries to end the comment', async () => {
    const meant = document('00000000-0000-4000-8000-000000000000');
    // LS and PS end a YAML 1.1 line. The admin API refuses them in names now, but a name stored before it did
    // may still be there: it is written straight into the store here, as such a record would be.
    const hostile = 'B\u2028injected: 2 #\u2028more: 3\u2029x: 1';
    // Descriptions with controls and separators are refused likewise, and stored straight the same way.
    expect((await admin.request('POST', '/admin/v1/platforms', { name: hostile, scopes: meant.scopes, routes: meant.routes })).status).toBe(422);
    expect((await admin.request('POST', '/admin/v1/platforms', { name: 'B', scopes: meant.scopes, routes: meant.routes })).status).toBe(422);
    const plain = meant.scopes.map((scope) => ({ name: scope.name }));
    const platform = await admin.createPlatform({ name: 'B', scopes: plain, routes: meant.routes });
    const stored = service.core.memory.platforms.get(platform.platform_id)!;
    service.core.memory.platforms.set(platform.platform_id, { ...stored, name: hostile, scopes: meant.scopes.map((scope) => ({ name: scope.name, description: scope.description ?? '' })) });
    await service.core.bus.publish({ kind: 'platform', platformId: platform.platform_id });
    meant.platform_id = platform.platform_id;
    const response = await service.fetch(`${service.publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`);
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text).toContain('injected: 2'); // the stored name is the one served (escaped where it must be)
    expect(parseYaml(text)).toEqual(meant);
    if (hasPyYaml) expect(readWithPyYaml(text)).toEqual(meant);
  });
});
