// In-process tests of how the middleware maps a request to a scope-file rule: the canonical path policy
// (node:http), lookup by the framework's route template (Fastify, Express route guard), every candidate
// rule (Express app-level middleware), and the verifier's answers for each. Tokens are signed with a
// local key served as a JWKS through the verifier's `fetch` option: no network.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { canonicalizeTarget, createVerifier, RouteTable } from '../../packages/middleware/src/index.js';

const PLATFORM = '6f1c7f0e-1d2b-4c3a-9e8f-0a1b2c3d4e5f';
const ROUTES = [
  { method: 'GET' as const, path: '/orders/{id}', scopes: ['orders:read'] },
  { method: 'GET' as const, path: '/orders/export', scopes: ['orders:export'] },
  { method: 'HEAD' as const, path: '/orders/{id}', scopes: ['orders:head'] },
  { method: 'GET' as const, path: '/files/{name}.json', scopes: ['files:read'] },
  { method: 'POST' as const, path: '/orders', scopes: ['orders:write'] },
  { method: 'GET' as const, path: '/api/orders/{id}', scopes: ['orders:read'] },
];
const table = new RouteTable(ROUTES);

describe('canonicalizeTarget', () => {
  it('decodes unreserved escapes only, upper-cases the others, drops one trailing slash, keeps the query', () => {
    const cases: [string, string][] = [
      ['/orders/%65xport', '/orders/export'],
      ['/orders/%65%78%70%6F%72%74', '/orders/export'],
      ['/%6Frders/exp%6frt?x=%41', '/orders/export?x=%41'],
      ['/orders/42/', '/orders/42'],
      ['/', '/'],
      ['/?a=1', '/?a=1'],
      ['/caf%c3%a9', '/caf%C3%A9'],
      ['/a%7eb%2D%5f%2E', '/a~b-_.'],
      ['/a%20b', '/a%20b'],
      ['/orders/EXPORT', '/orders/EXPORT'],
      ['/a;b=c/d', '/a;b=c/d'],
      ['/a%25', '/a%25'],
      ['/a%25zz', '/a%25zz'],
    ];
    for (const [target, expected] of cases) {
      const result = canonicalizeTarget(target);
      expect([target, result.ok && `${result.path}${result.query}`]).toEqual([target, expected]);
    }
  });

  it('refuses targets with no single reading', () => {
    const refused = [
      '/orders//42', '//orders/42', '/orders/export//', '/./x', '/x/.', '/x/..', '/x/../y', '/%2e/x', '/x/%2E%2e', '/x/.%2E/y',
      '/a%2Fb', '/a%2fb', '/a%5Cb', '/a\\b', '/a%00', '/a%0A', '/a%09', '/a%7F', '/a%2565', '/a%252565', '/a%25%65f', '/a%zz', '/a%4',
      'http://host/orders/export', '*', 'orders/export', '/a#b', '/a b', '/a\tb', '/é', '/a"b', '/a<b', '/a{b}', '/a|b', '/a^b', '/a`b',
    ];
    for (const target of refused) expect([target, canonicalizeTarget(target).ok]).toEqual([target, false]);
  });

  it('is idempotent: a canonical target is its own canonical form', () => {
    const chars = fc.constantFrom(...'/aAeE.;%2f5c0e6F~-_ ?#'.split(''), '%65', '%2e', '%2F', '%25', '%C3%A9', '//');
    fc.assert(
      fc.property(fc.array(chars, { maxLength: 24 }).map((parts) => `/${parts.join('')}`), (target) => {
        const once = canonicalizeTarget(target);
        if (!once.ok) return;
        const twice = canonicalizeTarget(`${once.path}${once.query}`);
        expect(twice).toEqual(once);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('RouteTable by canonical path (node:http)', () => {
  it('matches the canonical path exactly; literals before parameters', () => {
    expect(table.resolvePath('GET', '/orders/%65xport')).toMatchObject({ kind: 'rule', rule: { path: '/orders/export' }, canonical: '/orders/export' });
    expect(table.resolvePath('GET', '/orders/42/?x=1')).toMatchObject({ kind: 'rule', rule: { path: '/orders/{id}', scopes: ['orders:read'] }, canonical: '/orders/42?x=1' });
    expect(table.resolvePath('GET', '/orders/42;v=2')).toMatchObject({ kind: 'rule', rule: { path: '/orders/{id}' } });
    expect(table.resolvePath('GET', '/files/a.json')).toMatchObject({ kind: 'rule', rule: { path: '/files/{name}.json' } });
    expect(table.resolvePath('GET', '/files/a.txt')).toEqual({ kind: 'none', canonical: '/files/a.txt' });
    expect(table.resolvePath('DELETE', '/orders/42')).toMatchObject({ kind: 'none' });
    expect(table.resolvePath('post', '/orders')).toMatchObject({ kind: 'rule', rule: { scopes: ['orders:write'] } });
  });

  it('refuses as ambiguous a path that a looser reading sends to another rule', () => {
    for (const target of ['/orders/EXPORT', '/orders/Export', '/orders/%45xport', '/orders/export;v=1', '/orders/export%20', '/orders/%20export', '/orders/export.', '/orders/%65xport%2E', '/orders/export%3Bv=1']) {
      expect([target, table.resolvePath('GET', target).kind]).toEqual([target, 'ambiguous']);
    }
    // Paths that read as another rule nowhere stay fine, whatever their case.
    expect(table.resolvePath('GET', '/orders/ABC')).toMatchObject({ kind: 'rule', rule: { path: '/orders/{id}' } });
  });

  it('answers bad-path for what the canonical policy refuses', () => {
    for (const target of ['/orders/%2Fexport', '/orders/x/../export', '/orders//export', '/orders/%2565xport']) {
      expect(table.resolvePath('GET', target).kind).toBe('bad-path');
    }
  });

  it('HEAD needs the scopes of its own rule and of the GET rule', () => {
    expect(table.resolvePath('HEAD', '/orders/42')).toMatchObject({ kind: 'rule', rule: { method: 'HEAD', scopes: ['orders:head', 'orders:read'] } });
    // A HEAD rule that matches too (here HEAD /orders/{id}) adds its scopes: stricter, never looser.
    expect(table.resolvePath('HEAD', '/orders/export')).toMatchObject({ kind: 'rule', rule: { scopes: ['orders:head', 'orders:export'] } });
  });

  it('property: no spelling that a lenient handler reads as /orders/export gets a rule other than its own', () => {
    const letter = (ch: string) => fc.constantFrom(ch, ch.toUpperCase(), `%${ch.charCodeAt(0).toString(16)}`, `%${ch.charCodeAt(0).toString(16).toUpperCase()}`, `%25${ch.charCodeAt(0).toString(16)}`);
    const spelled = fc.tuple(...[...'export'].map(letter)).map((l) => l.join(''));
    const suffix = fc.constantFrom('', '', ';v=1', '%20', '%09', '.', '%2e', '/', '//', '?a', '#f', '%00');
    fc.assert(
      fc.property(fc.constantFrom('GET', 'HEAD', 'get'), fc.constantFrom('/orders/', '/%6Frders/', '/ORDERS/'), spelled, suffix, (method, prefix, word, end) => {
        const resolution = table.resolvePath(method, `${prefix}${word}${end}`);
        if (resolution.kind === 'rule') expect(resolution.rule.scopes).toContain('orders:export');
      }),
      { numRuns: 3000 },
    );
  });
});

describe('RouteTable by framework template (Fastify, Express route guard)', () => {
  it('looks rules up by method and template shape, parameter names aside', () => {
    expect(table.resolveTemplate('GET', '/orders/:id', 'fastify')).toMatchObject({ kind: 'rule', rule: { path: '/orders/{id}' } });
    expect(table.resolveTemplate('GET', '/orders/:orderId(^\\d+)', 'fastify')).toMatchObject({ kind: 'rule', rule: { path: '/orders/{id}' } });
    expect(table.resolveTemplate('GET', '/orders/export', 'fastify')).toMatchObject({ kind: 'rule', rule: { scopes: ['orders:export'] } });
    expect(table.resolveTemplate('GET', '/files/:name.json', 'fastify')).toMatchObject({ kind: 'rule', rule: { path: '/files/{name}.json' } });
    expect(table.resolveTemplate('GET', '/orders/:id', 'express')).toMatchObject({ kind: 'rule', rule: { path: '/orders/{id}' } });
    expect(table.resolveTemplate('GET', '/orders/:id/', 'express')).toMatchObject({ kind: 'rule', rule: { path: '/orders/{id}' } });
    expect(table.resolveTemplate('GET', '/orders/{id}', 'scope-file')).toMatchObject({ kind: 'rule' });
    expect(table.resolveTemplate('get', '/orders/:id', 'express')).toMatchObject({ kind: 'rule' });
  });

  it('HEAD on a GET route needs both rules; arrays need every rule', () => {
    expect(table.resolveTemplate('HEAD', '/orders/:id', 'fastify')).toMatchObject({ kind: 'rule', rule: { scopes: ['orders:head', 'orders:read'] } });
    expect(table.resolveTemplate('HEAD', '/orders/export', 'fastify')).toMatchObject({ kind: 'rule', rule: { scopes: ['orders:export'] } });
    expect(table.resolveTemplate('GET', ['/orders/:id', '/orders/export'], 'express')).toMatchObject({ kind: 'rule', rule: { scopes: ['orders:read', 'orders:export'] } });
    expect(table.resolveTemplate('GET', ['/orders/:id', '/unlisted'], 'express')).toEqual({ kind: 'none' });
  });

  it('maps to no rule what the scope file cannot express or does not list', () => {
    const none: [string, 'fastify' | 'express'][] = [
      ['/orders/*', 'fastify'],
      ['/orders/:id(a)(b)x*', 'fastify'],
      ['/orders/{id}', 'fastify'],
      ['/Orders/export', 'fastify'],
      ['/orders{/:id}', 'express'],
      ['/orders/*rest', 'express'],
      ['/orders/:id?', 'express'],
      ['/orders/(.*)', 'express'],
      ['/orders/%65xport', 'express'],
      ['orders/:id', 'express'],
      ['/orders/:id/items', 'express'],
    ];
    for (const [template, syntax] of none) expect([template, table.resolveTemplate('GET', template, syntax)]).toEqual([template, { kind: 'none' }]);
    expect(table.resolveTemplate('GET', undefined, 'fastify')).toEqual({ kind: 'none' });
    expect(table.resolveTemplate('DELETE', '/orders/:id', 'fastify')).toEqual({ kind: 'none' });
  });
});

describe('RouteTable by every candidate (Express app-level middleware)', () => {
  it('requires the scopes of every rule the path could reach, raw or decoded, in any case', () => {
    expect(table.resolveCandidates('GET', '/orders/42')).toMatchObject({ kind: 'rule', rule: { scopes: ['orders:read'] } });
    expect(table.resolveCandidates('GET', '/ORDERS/42/')).toMatchObject({ kind: 'rule', rule: { scopes: ['orders:read'] } });
    for (const target of ['/orders/export', '/orders/EXPORT', '/orders/%65xport', '/Orders/Export/?x=1']) {
      expect([target, table.resolveCandidates('GET', target)]).toMatchObject([target, { kind: 'rule', rule: { scopes: expect.arrayContaining(['orders:read', 'orders:export']) } }]);
    }
    expect(table.resolveCandidates('GET', '/orders//export')).toEqual({ kind: 'none' });
    expect(table.resolveCandidates('GET', 'http://h/orders/export').kind).toBe('bad-path');
    expect(table.resolveCandidates('GET', '/orders/%zz').kind).toBe('bad-path');
  });
});

describe('verifier answers', () => {
  async function localVerifier(unmatchedRoutes?: 'deny' | 'authenticate') {
    const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    const fakeFetch = (async () =>
      new Response(JSON.stringify({ keys: [jwk] }), { headers: { 'content-type': 'application/json', 'cache-control': 'max-age=60' } })) as typeof fetch;
    const scopesDocument = { schema: 'SvcScopesYaml', version: 1, platform_id: PLATFORM, scopes: [], routes: ROUTES };
    const verifier = createVerifier({ serviceUrl: 'https://ace.test', scopesDocument, fetch: fakeFetch, unmatchedRoutes, feedToken: 'acef_unused' });
    const token = (scope: string) =>
      new SignJWT({ scope, svc_token_profile: 'svc-native-jwt' })
        .setProtectedHeader({ alg: 'RS256', kid: 'k1', typ: 'JWT' })
        .setIssuer('https://ace.test')
        .setAudience(PLATFORM)
        .setSubject('agent-1')
        .setIssuedAt()
        .setExpirationTime('1m')
        .sign(privateKey);
    return { verifier, token };
  }

  it('400 without a challenge for a path with no single reading, 403 for an ambiguous one, canonical target on success', async () => {
    const { verifier, token } = await localVerifier();
    const authorization = `Bearer ${await token('orders:read')}`;
    const bad = await verifier.authorize({ method: 'GET', path: '/orders/%2Fexport', authorization });
    expect(bad).toMatchObject({ ok: false, status: 400, code: 'invalid_request' });
    expect(bad.ok || bad.wwwAuthenticate).toBeUndefined();
    const ambiguous = await verifier.authorize({ method: 'GET', path: '/orders/EXPORT', authorization });
    expect(ambiguous).toMatchObject({ ok: false, status: 403, code: 'insufficient_scope' });
    expect(ambiguous.ok || ambiguous.wwwAuthenticate).toContain('error="insufficient_scope"');
    const encoded = await verifier.authorize({ method: 'GET', path: '/orders/%65xport', authorization });
    expect(encoded).toMatchObject({ ok: false, status: 403 });
    expect(encoded.ok || encoded.wwwAuthenticate).toContain('scope="orders:export"');
    const fine = await verifier.authorize({ method: 'GET', path: '/orders/4%32/', authorization });
    expect(fine).toMatchObject({ ok: true, canonicalTarget: '/orders/42', claims: { route: { path: '/orders/{id}' } } });
    // The token is checked first: without one, any spelling gets the plain 401 challenge.
    expect(await verifier.authorize({ method: 'GET', path: '/orders/%2Fexport', authorization: undefined })).toMatchObject({ status: 401 });
    verifier.close();
  });

  it('fails closed in every mode; unmatchedRoutes "authenticate" opens unlisted routes but never doubtful ones', async () => {
    const { verifier, token } = await localVerifier('authenticate');
    const authorization = `Bearer ${await token('orders:read')}`;
    expect(await verifier.authorize({ method: 'GET', path: '/unlisted', authorization })).toMatchObject({ ok: true, canonicalTarget: '/unlisted' });
    expect(await verifier.authorize({ method: 'GET', path: '/orders/Export', authorization })).toMatchObject({ ok: false, status: 403 });
    expect(await verifier.authorize({ method: 'GET', path: '/orders/%2e%2e/x', authorization })).toMatchObject({ ok: false, status: 400 });
    expect(await verifier.authorize({ method: 'GET', target: { kind: 'candidates', path: 'http://h/orders/export' }, authorization })).toMatchObject({ ok: false, status: 400 });
    expect(await verifier.authorize({ method: 'GET', target: { kind: 'template', template: '/orders/export', syntax: 'fastify' }, authorization })).toMatchObject({ ok: false, status: 403 });
    expect(await verifier.authorize({ method: 'GET', target: { kind: 'template', template: '/orders/:id', syntax: 'fastify' }, authorization })).toMatchObject({ ok: true });
    verifier.close();

    const strict = await localVerifier();
    const auth2 = `Bearer ${await strict.token('orders:read orders:export')}`;
    expect(await strict.verifier.authorize({ method: 'GET', target: { kind: 'template', template: undefined, syntax: 'fastify' }, authorization: auth2 })).toMatchObject({ ok: false, status: 403 });
    expect(await strict.verifier.authorize({ method: 'GET', target: { kind: 'template', template: '/orders/*', syntax: 'fastify' }, authorization: auth2 })).toMatchObject({ ok: false, status: 403 });
    expect(await strict.verifier.authorize({ method: 'GET', target: { kind: 'candidates', path: '/orders/EXPORT' }, authorization: auth2 })).toMatchObject({ ok: true });
    strict.verifier.close();
  });
});
