// The middleware's start-up: the scope file is validated against the SvcScopesYaml schema and compiled
// into a route table (no service needed: these never reach the network).
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createVerifier, RouteTable, ScopeFileError } from '../../packages/middleware/src/index.js';

const PLATFORM = '6f1c7f0e-1d2b-4c3a-9e8f-0a1b2c3d4e5f';
const YAML = `schema: SvcScopesYaml
version: 1
platform_id: ${PLATFORM}
scopes:
  - name: orders:read
    description: Read orders
  - name: orders:write
    description: Write orders
routes:
  - method: GET
    path: /orders/{id}
    scopes: [orders:read]
  - method: GET
    path: /orders/new
    scopes: [orders:write]
  - method: GET
    path: /files/{name}.json
    scopes: [orders:read]
  - method: POST
    path: /orders
    scopes: [orders:write]
`;

const base = { serviceUrl: 'http://127.0.0.1:1', feedToken: `acef_${'x'.repeat(43)}` };

describe('scope file at start-up', () => {
  it('reads the file from a path or a string, and takes the platform id from it', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ace-scopes-'));
    const file = path.join(dir, 'scopes.yaml');
    writeFileSync(file, YAML);
    expect(createVerifier({ ...base, scopesFile: file }).platformId).toBe(PLATFORM);
    expect(createVerifier({ ...base, scopesYaml: YAML }).platformId).toBe(PLATFORM);
    expect(createVerifier({ ...base, scopesYaml: YAML }).realm).toBe(PLATFORM);
    expect(createVerifier({ ...base, scopesYaml: YAML, realm: 'shop' }).realm).toBe('shop');
  });

  it('rejects documents that do not match SvcScopesYaml, naming the problem', () => {
    const cases = [
      YAML.replace('schema: SvcScopesYaml', 'schema: Other'),
      YAML.replace('version: 1', 'version: 2'),
      YAML.replace(PLATFORM, 'not-a-uuid'),
      YAML.replace('method: POST', 'method: FETCH'),
      YAML.replace('path: /orders\n', 'path: orders\n'),
      `${YAML}extra: true\n`,
      'routes: [\n',
    ];
    for (const text of cases) expect(() => createVerifier({ ...base, scopesYaml: text })).toThrow(ScopeFileError);
    expect(() => createVerifier({ ...base, scopesYaml: YAML.replace('version: 1', 'version: 2') })).toThrow(/version/);
  });

  it('refuses a platformId that differs from the file', () => {
    expect(() => createVerifier({ ...base, scopesYaml: YAML, platformId: '00000000-0000-4000-8000-000000000000' })).toThrow(/platform_id/);
  });

  it('matches templates: literals before parameters, query ignored, one trailing slash ignored, HEAD as GET', () => {
    const verifier = createVerifier({ ...base, scopesYaml: YAML });
    expect(verifier.routeFor('GET', '/orders/42?x=1')?.scopes).toEqual(['orders:read']);
    expect(verifier.routeFor('GET', '/orders/new')?.scopes).toEqual(['orders:write']);
    expect(verifier.routeFor('GET', '/orders/42/')?.path).toBe('/orders/{id}');
    expect(verifier.routeFor('HEAD', '/orders/42')?.path).toBe('/orders/{id}');
    expect(verifier.routeFor('GET', '/files/report.json')?.path).toBe('/files/{name}.json');
    expect(verifier.routeFor('GET', '/files/report.txt')).toBeUndefined();
    expect(verifier.routeFor('GET', '/orders/42/items')).toBeUndefined();
    expect(verifier.routeFor('GET', '/orders//42')).toBeUndefined();
    expect(verifier.routeFor('GET', '/orders')).toBeUndefined();
    expect(verifier.routeFor('DELETE', '/orders/42')).toBeUndefined();
    expect(verifier.routeFor('post', '/orders')?.scopes).toEqual(['orders:write']);
  });

  it('merges duplicate rules for the same route by requiring all their scopes', () => {
    const table = new RouteTable([
      { method: 'GET', path: '/a/{x}', scopes: ['one'] },
      { method: 'GET', path: '/a/{x}', scopes: ['two'] },
    ]);
    expect(table.match('GET', '/a/1')?.scopes).toEqual(['one', 'two']);
  });

  it('refuses a request without a token before looking further, without network', async () => {
    const verifier = createVerifier({ ...base, scopesYaml: YAML });
    const result = await verifier.authorize({ method: 'GET', path: '/orders/1', authorization: undefined });
    expect(result).toMatchObject({ ok: false, status: 401, wwwAuthenticate: `Bearer realm="${PLATFORM}"` });
  });

  it('answers 503 (not 401) when the signing keys cannot be fetched', async () => {
    const verifier = createVerifier({ ...base, scopesYaml: YAML, jwksTimeoutMs: 500 });
    const token = 'eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJ4In0.c2ln';
    const result = await verifier.authorize({ method: 'GET', path: '/orders/1', authorization: `Bearer ${token}` });
    expect(result).toMatchObject({ ok: false, status: 503 });
    if (!result.ok) expect(result.headers['retry-after']).toBeDefined();
    await expect(verifier.ready()).rejects.toThrow();
  });
});
