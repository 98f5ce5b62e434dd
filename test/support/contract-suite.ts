// The public contract (docs/contract.md + docs/decisions.md) as one suite, run against several targets:
// in process (test/in-process/contract.test.ts: HttpServer.inject into the whole app on the memory ports,
// every case) and in a service process over real Postgres + Redis and over the embedded PGlite
// (test/integration/contract.test.ts: the cases whose answer depends on the stores, the worker pools or the
// caches: storeCase). requestCase: the request handling itself (validation, refusals, error shapes, 404/405,
// the admin API's checks), the same code whatever the stores, so run in process only unless `everything`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, decodeJwt } from 'jose';
import { parse as parseYaml } from 'yaml';
import { Ajv } from 'ajv';
import * as ajvFormats from 'ajv-formats';
import { randomBytes } from 'node:crypto';
import { SvcScopesYaml } from '../../packages/protocol/src/scopes-file.js';
import { postJson, type AdminClient } from '../../kit/admin.js';

export const TOKEN_LIMIT = 6;
export const FAIL_LIMIT = 4;
/** What the target must be started with (the service trusts X-Forwarded-For in these tests). */
export const CONTRACT_ENV = {
  TRUST_PROXY: 'true',
  RATE_LIMIT_TOKEN_POINTS: String(TOKEN_LIMIT),
  RATE_LIMIT_AUTH_FAIL_POINTS: String(FAIL_LIMIT),
};

export interface ContractTarget {
  publicUrl: string;
  adminUrl: string;
  adminToken: string;
  fetch: typeof fetch;
  admin: AdminClient;
  /** Whether argon2 and signing run in worker pools (a service process), whose series /metrics then shows. */
  workerPools: boolean;
  dispose(): Promise<void>;
}

export interface ContractOptions {
  /** Run the request-handling cases too (the in-process target), not only the store-dependent ones. */
  everything: boolean;
  /** Cases of the target's own inside "bad bodies" (given a valid token request body). */
  extraBodyCases?: (context: { target: () => ContractTarget }) => void;
}

let addressCounter = 0;
/** A fresh client address per use. */
export const freshAddress = () => `198.51.100.${++addressCounter}`;

/** The contract's Error shape: exactly error_code and a non-empty detail, as JSON. */
export const expectError = (response: { status: number; body: any; headers: Headers }, status: number, code: string) => {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  expect(Object.keys(response.body).sort()).toEqual(['detail', 'error_code']);
  expect(response.body.error_code).toBe(code);
  expect(typeof response.body.detail).toBe('string');
  expect(response.body.detail.length).toBeGreaterThan(0);
};

export function describeContract(label: string, start: () => Promise<ContractTarget>, options: ContractOptions): void {
  const storeCase = it;
  const requestCase = (options.everything ? it : () => undefined) as typeof it;
  const requestGroup = (options.everything ? describe : () => undefined) as typeof describe;

  describe(`public contract (${label})`, () => {
    let target: ContractTarget;
    let admin: AdminClient;

    beforeAll(async () => {
      target = await start();
      admin = target.admin;
    });
    afterAll(async () => {
      await target?.dispose();
    });

    const token = (body: unknown, address = freshAddress(), headers: Record<string, string> = {}) =>
      postJson(`${target.publicUrl}/api/v1/auth/token`, body, { 'x-forwarded-for': address, ...headers }, target.fetch);
    const listing = (body: unknown, address = freshAddress()) =>
      postJson(`${target.publicUrl}/api/v1/auth/agents/me/platforms`, body, { 'x-forwarded-for': address }, target.fetch);
    const jwks = async () => createLocalJWKSet((await (await target.fetch(`${target.publicUrl}/.well-known/jwks.json`)).json()) as Parameters<typeof createLocalJWKSet>[0]);

    describe('POST /api/v1/auth/token', () => {
      storeCase('issues an RS256 JWT with exactly the decided claims, verifiable with the served JWKS', async () => {
        const { platform, agent } = await admin.seed(['orders:write', 'orders:read']);
        const response = await token({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id });
        expect(response.status).toBe(200);
        expect(response.headers.get('cache-control')).toBe('no-store');
        expect(response.body).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 900 });
        const header = decodeProtectedHeader(response.body.access_token);
        expect(header).toEqual({ alg: 'RS256', typ: 'JWT', kid: expect.any(String) });
        const { payload } = await jwtVerify(response.body.access_token, await jwks(), {
          audience: platform.platform_id,
          algorithms: ['RS256'],
        });
        expect(Object.keys(payload).sort()).toEqual(
          ['aud', 'client_id', 'exp', 'iat', 'iss', 'jti', 'nbf', 'scope', 'sub', 'svc_token_profile'].sort(),
        );
        expect(payload.aud).toBe(platform.platform_id);
        expect(payload.sub).toBe(agent.agent_id);
        expect(payload.client_id).toBe(agent.api_key_id);
        expect(payload.svc_token_profile).toBe('svc-native-jwt');
        expect(payload.scope).toBe('orders:read orders:write'); // all granted, sorted
        expect(payload.nbf).toBe(payload.iat);
        expect(payload.exp! - payload.iat!).toBe(900);
        expect(payload.iss).toBe(target.publicUrl);
        expect(Math.abs(payload.iat! - Date.now() / 1000)).toBeLessThan(30);
        const again = await token({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id });
        expect(decodeJwt(again.body.access_token).jti).not.toBe(payload.jti);
      });

      requestCase('issues a requested subset, merging duplicates, and accepts the explicit profile', async () => {
        const { platform, agent } = await admin.seed(['a:read', 'b:read', 'c:read']);
        const response = await token({
          api_key_id: agent.api_key_id,
          secret: agent.secret,
          platform_id: platform.platform_id,
          scopes: ['c:read', 'a:read', 'c:read'],
          profile: 'svc-native-jwt',
        });
        expect(response.status).toBe(200);
        expect(decodeJwt(response.body.access_token).scope).toBe('a:read c:read');
      });

      requestCase('refuses a scope outside the grant with 403 invalid_scope', async () => {
        const { platform, agent } = await admin.seed(['a:read', 'b:write'], ['a:read']);
        const response = await token({
          api_key_id: agent.api_key_id,
          secret: agent.secret,
          platform_id: platform.platform_id,
          scopes: ['a:read', 'b:write'],
        });
        expectError(response, 403, 'invalid_scope');
      });

      requestCase('refuses an empty resolved scope set with 403 invalid_scope', async () => {
        const { platform, agent } = await admin.seed(['a:read'], []);
        const response = await token({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id });
        expectError(response, 403, 'invalid_scope');
      });

      requestCase('answers unknown api_key_id and wrong secret with byte-identical 401 bodies', async () => {
        const { platform, agent } = await admin.seed();
        const unknown = await token({
          api_key_id: `agnt_kid_${randomBytes(16).toString('hex')}`,
          secret: 'whatever-secret',
          platform_id: platform.platform_id,
        });
        const wrong = await token({ api_key_id: agent.api_key_id, secret: 'wrong-secret', platform_id: platform.platform_id });
        expectError(unknown, 401, 'invalid_credentials');
        expect(wrong.status).toBe(401);
        expect(wrong.text).toBe(unknown.text);
        expect(wrong.headers.get('content-type')).toBe(unknown.headers.get('content-type'));
        expect(unknown.text).not.toContain(agent.api_key_id);
      });

      requestCase('issues profile oauth-at-jwt (RFC 9068): header typ at+jwt, the same claims, verifiable with the JWKS', async () => {
        const { platform, agent } = await admin.seed(['orders:write', 'orders:read']);
        const response = await token({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id, profile: 'oauth-at-jwt' });
        expect(response.status).toBe(200);
        expect(response.body).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 900 });
        expect(decodeProtectedHeader(response.body.access_token)).toEqual({ alg: 'RS256', typ: 'at+jwt', kid: expect.any(String) });
        const { payload } = await jwtVerify(response.body.access_token, await jwks(), {
          audience: platform.platform_id,
          algorithms: ['RS256'],
          typ: 'at+jwt',
          requiredClaims: ['iss', 'exp', 'aud', 'sub', 'client_id', 'iat', 'jti'],
        });
        expect(Object.keys(payload).sort()).toEqual(
          ['aud', 'client_id', 'exp', 'iat', 'iss', 'jti', 'nbf', 'scope', 'sub', 'svc_token_profile'].sort(),
        );
        expect(payload).toMatchObject({ sub: agent.agent_id, client_id: agent.api_key_id, scope: 'orders:read orders:write', svc_token_profile: 'oauth-at-jwt' });
      });

      requestCase('gives 422 unsupported_profile for any unknown profile', async () => {
        const { platform, agent } = await admin.seed();
        for (const profile of ['oauth-at-jwt-v2', 'something-else', 'OAUTH-AT-JWT']) {
          const response = await token({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id, profile });
          expectError(response, 422, 'unsupported_profile');
        }
        const wrongType = await token({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id, profile: 7 });
        expectError(wrongType, 422, 'validation_error');
        expect(wrongType.body.detail).toContain('profile');
      });

      storeCase('gives 403 agent_inactive for an inactive agent, and works again once reactivated', async () => {
        const { platform, agent } = await admin.seed();
        const body = { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id };
        expect((await token(body)).status).toBe(200); // now remembered as verified: the change must still win
        await admin.patchAgent(agent.agent_id, { status: 'inactive' });
        expectError(await token(body), 403, 'agent_inactive');
        await admin.patchAgent(agent.agent_id, { status: 'active' });
        expect((await token(body)).status).toBe(200);
      });

      requestCase('gives 403 platform_access_denied without a grant, for an unknown platform and for a platform not active', async () => {
        const { platform, agent } = await admin.seed();
        const other = await admin.createPlatform({ name: 'Other', scopes: [{ name: 'x' }] });
        const base = { api_key_id: agent.api_key_id, secret: agent.secret };
        expectError(await token({ ...base, platform_id: other.platform_id }), 403, 'platform_access_denied');
        expectError(await token({ ...base, platform_id: crypto.randomUUID() }), 403, 'platform_access_denied');
        for (const status of ['suspended', 'disabled']) {
          await admin.patchPlatform(platform.platform_id, { status });
          expectError(await token({ ...base, platform_id: platform.platform_id }), 403, 'platform_access_denied');
        }
        await admin.patchPlatform(platform.platform_id, { status: 'active' });
        expect((await token({ ...base, platform_id: platform.platform_id })).status).toBe(200);
      });

      storeCase('stops issuing at once when the grant is removed', async () => {
        const { platform, agent } = await admin.seed();
        const body = { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id };
        expect((await token(body)).status).toBe(200);
        await admin.revoke(agent.agent_id, platform.platform_id);
        expectError(await token(body), 403, 'platform_access_denied');
      });

      storeCase('rate-limits per api_key_id with 429 and an integer Retry-After', async () => {
        const { platform, agent } = await admin.seed();
        const body = { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id };
        for (let i = 0; i < TOKEN_LIMIT; i++) expect((await token(body)).status).toBe(200);
        const limited = await token(body);
        expectError(limited, 429, 'rate_limited');
        const retryAfter = limited.headers.get('retry-after')!;
        expect(retryAfter).toMatch(/^\d+$/);
        expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
        expect(Number(retryAfter)).toBeLessThanOrEqual(60);
      });

      requestCase("does not let a stranger who knows the api_key_id spend the agent's budget", async () => {
        const { platform, agent } = await admin.seed();
        for (let i = 0; i < TOKEN_LIMIT + 2; i++) {
          const attempt = await token({ api_key_id: agent.api_key_id, secret: `guess-${i}`, platform_id: platform.platform_id });
          expect(attempt.status).toBe(401);
        }
        const real = await token({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id });
        expect(real.status).toBe(200);
      });

      storeCase('limits failed authentications per client address with 429', async () => {
        const { platform } = await admin.seed();
        const address = freshAddress();
        const statuses: number[] = [];
        for (let i = 0; i < FAIL_LIMIT + 2; i++) {
          const r = await token({ api_key_id: `agnt_kid_${randomBytes(16).toString('hex')}`, secret: 'x', platform_id: platform.platform_id }, address);
          statuses.push(r.status);
          if (r.status === 429) {
            expectError(r, 429, 'rate_limited');
            expect(r.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
          }
        }
        expect(statuses.slice(0, FAIL_LIMIT)).toEqual(Array(FAIL_LIMIT).fill(401));
        expect(statuses.at(-1)).toBe(429);
        // Another address is not affected.
        const other = await token({ api_key_id: `agnt_kid_${randomBytes(16).toString('hex')}`, secret: 'x', platform_id: platform.platform_id });
        expect(other.status).toBe(401);
      });

      describe('bad bodies', () => {
        let valid: Record<string, unknown>;
        beforeAll(async () => {
          const { platform, agent } = await admin.seed();
          valid = { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id };
        });

        requestCase('400 invalid_json for a body that is not JSON', async () => {
          expectError(await token('{"api_key_id": '), 400, 'invalid_json');
        });

        requestCase('415 unsupported_media_type when Content-Type is not application/json', async () => {
          const response = await target.fetch(`${target.publicUrl}/api/v1/auth/token`, {
            method: 'POST',
            headers: { 'content-type': 'text/plain', 'x-forwarded-for': freshAddress() },
            body: JSON.stringify(valid),
          });
          expectError({ status: response.status, headers: response.headers, body: await response.json() }, 415, 'unsupported_media_type');
        });

        requestCase('accepts application/json with a charset parameter', async () => {
          expect((await token(valid, freshAddress(), { 'content-type': 'application/json; charset=utf-8' })).status).toBe(200);
        });

        requestCase('413 payload_too_large for a body over 16 KiB', async () => {
          const response = await token({ ...valid, padding: 'x'.repeat(17 * 1024) });
          expectError(response, 413, 'payload_too_large');
        });

        options.extraBodyCases?.({ target: () => target });

        const cases: [string, (v: Record<string, unknown>) => unknown, string][] = [
          ['missing api_key_id', ({ api_key_id, ...rest }) => rest, 'api_key_id'],
          ['missing secret', ({ secret, ...rest }) => rest, 'secret'],
          ['missing platform_id', ({ platform_id, ...rest }) => rest, 'platform_id'],
          ['api_key_id of the wrong form', (v) => ({ ...v, api_key_id: 'agnt_kid_XYZ' }), 'api_key_id'],
          ['api_key_id with upper-case hex', (v) => ({ ...v, api_key_id: `agnt_kid_${'A'.repeat(32)}` }), 'api_key_id'],
          ['api_key_id with another prefix', (v) => ({ ...v, api_key_id: `zzzz_kid_${'a'.repeat(32)}` }), 'api_key_id'],
          ['platform_id not a UUID', (v) => ({ ...v, platform_id: 'not-a-uuid' }), 'platform_id'],
          ['secret not a string', (v) => ({ ...v, secret: 12345 }), 'secret'],
          ['scopes not an array', (v) => ({ ...v, scopes: 'orders:read' }), 'scopes'],
          ['scopes not strings', (v) => ({ ...v, scopes: ['orders:read', 5] }), 'scopes'],
          ['body an array', () => [1, 2], 'body'],
          ['body null', () => null, 'body'],
        ];
        for (const [name, mutate, field] of cases) {
          requestCase(`422 validation_error naming the field: ${name}`, async () => {
            const response = await token(mutate(valid));
            expectError(response, 422, 'validation_error');
            if (field !== 'body') expect(response.body.detail).toContain(field);
          });
        }

        requestCase('ignores unknown extra fields', async () => {
          expect((await token({ ...valid, extra: { nested: true }, another: 1 })).status).toBe(200);
        });
      });
    });

    describe('POST /api/v1/auth/agents/me/platforms', () => {
      storeCase('lists every granted platform with sorted scopes, status and enrichment; hostname only when verified', async () => {
        const agent = await admin.createAgent('lister');
        const verified = await admin.createPlatform({
          name: 'Verified',
          domain: 'api.verified.example',
          verification_status: 'verified',
          scopes: [{ name: 'z' }, { name: 'a' }],
        });
        const pending = await admin.createPlatform({ name: 'Pending', domain: 'pending.example', scopes: [{ name: 'p' }], status: 'suspended' });
        await admin.grant(agent.agent_id, verified.platform_id, ['z', 'a']);
        await admin.grant(agent.agent_id, pending.platform_id, ['p']);
        const response = await listing({ api_key_id: agent.api_key_id, secret: agent.secret });
        expect(response.status).toBe(200);
        expect(response.body.agent_id).toBe(agent.agent_id);
        const byId = Object.fromEntries(response.body.platforms.map((p: any) => [p.platform_id, p]));
        expect(Object.keys(byId).sort()).toEqual([verified.platform_id, pending.platform_id].sort());
        expect(byId[verified.platform_id]).toEqual({
          platform_id: verified.platform_id,
          granted_scopes: ['a', 'z'],
          status: 'active',
          name: 'Verified',
          hostname: 'api.verified.example',
          verification_status: 'verified',
        });
        expect(byId[pending.platform_id]).toMatchObject({ status: 'suspended', hostname: null, verification_status: 'pending', name: 'Pending' });
      });

      requestCase('answers 401 with the same body as the token endpoint, and 403 agent_inactive', async () => {
        const agent = await admin.createAgent('lister2');
        const wrong = await listing({ api_key_id: agent.api_key_id, secret: 'nope' });
        const unknownToken = await token({ api_key_id: `agnt_kid_${'0'.repeat(32)}`, secret: 'nope', platform_id: crypto.randomUUID() });
        expectError(wrong, 401, 'invalid_credentials');
        expect(wrong.text).toBe(unknownToken.text);
        await admin.patchAgent(agent.agent_id, { status: 'inactive' });
        expectError(await listing({ api_key_id: agent.api_key_id, secret: agent.secret }), 403, 'agent_inactive');
      });

      requestCase('validates its body like the token endpoint', async () => {
        expectError(await listing({ api_key_id: 'bad' , secret: 'x' }), 422, 'validation_error');
        expectError(await listing('nope'), 400, 'invalid_json');
      });
    });

    describe('GET /.well-known/jwks.json', () => {
      requestCase('serves public members only, with caching headers, a strong ETag and 304', async () => {
        const response = await target.fetch(`${target.publicUrl}/.well-known/jwks.json`);
        expect(response.status).toBe(200);
        expect(response.headers.get('cache-control')).toBe('public, max-age=3600');
        expect(response.headers.get('content-type')).toMatch(/^application\/json/);
        const etag = response.headers.get('etag')!;
        expect(etag).toMatch(/^"[^"]+"$/); // strong: no W/ prefix
        const body = (await response.json()) as { keys: Record<string, string>[] };
        expect(body.keys.length).toBeGreaterThanOrEqual(1);
        for (const key of body.keys) {
          expect(Object.keys(key).sort()).toEqual(['alg', 'e', 'kid', 'kty', 'n', 'use']);
          expect(key).toMatchObject({ kty: 'RSA', use: 'sig', alg: 'RS256' });
          expect(Buffer.from(key.n, 'base64url').length).toBeGreaterThanOrEqual(256); // at least 2048 bits
        }
        const cached = await target.fetch(`${target.publicUrl}/.well-known/jwks.json`, { headers: { 'if-none-match': etag } });
        expect(cached.status).toBe(304);
        expect(await cached.text()).toBe('');
        // RFC 9110 §8.6: a 304's Content-Length, if any, is the full representation's.
        const length = cached.headers.get('content-length');
        if (length !== null) expect(Number(length)).toBe(Buffer.byteLength(JSON.stringify(body)));
        const stale = await target.fetch(`${target.publicUrl}/.well-known/jwks.json`, { headers: { 'if-none-match': '"other"' } });
        expect(stale.status).toBe(200);
      });

      storeCase("lists the active key first: the one tokens are signed with", async () => {
        const { platform, agent } = await admin.seed();
        const issued = await token({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id });
        const body = (await (await target.fetch(`${target.publicUrl}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] };
        expect(body.keys[0].kid).toBe(decodeProtectedHeader(issued.body.access_token).kid);
      });
    });

    describe('GET /api/v1/platforms/{platform_id}/scopes.yaml', () => {
      storeCase('serves an SvcScopesYaml v1 document that validates against the schema', async () => {
        const platform = await admin.createPlatform({
          name: 'Orders',
          scopes: [{ name: 'orders:read', description: 'Read orders' }, { name: 'orders:write' }],
          routes: [
            { method: 'get', path: '/orders/{id}', scopes: ['orders:read'] },
            { method: 'POST', path: '/orders', scopes: ['orders:write'] },
          ],
        });
        const response = await target.fetch(`${target.publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`);
        expect(response.status).toBe(200);
        expect(response.headers.get('content-type')).toBe('text/yaml; charset=utf-8');
        const etag = response.headers.get('etag')!;
        expect(etag).toMatch(/^"[^"]+"$/);
        const document = parseYaml(await response.text());
        const ajv = new Ajv({ strict: false });
        (ajvFormats.default as unknown as (a: Ajv) => void)(ajv);
        expect(ajv.validate(SvcScopesYaml, document), ajv.errorsText()).toBe(true);
        expect(document).toEqual({
          schema: 'SvcScopesYaml',
          version: 1,
          platform_id: platform.platform_id,
          scopes: [
            { name: 'orders:read', description: 'Read orders' },
            { name: 'orders:write', description: '' },
          ],
          routes: [
            { method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] },
            { method: 'POST', path: '/orders', scopes: ['orders:write'] },
          ],
        });
        const again = await target.fetch(`${target.publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`, {
          headers: { 'if-none-match': etag },
        });
        expect(again.status).toBe(304);
        // A change gives a new document and a new ETag.
        await admin.patchPlatform(platform.platform_id, { routes: [] });
        const changed = await target.fetch(`${target.publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`, {
          headers: { 'if-none-match': etag },
        });
        expect(changed.status).toBe(200);
        expect(parseYaml(await changed.text()).routes).toEqual([]);
      });

      requestCase('404 not_found for an unknown platform, 422 validation_error for a malformed id, as JSON', async () => {
        const unknown = await target.fetch(`${target.publicUrl}/api/v1/platforms/${crypto.randomUUID()}/scopes.yaml`);
        expectError({ status: unknown.status, headers: unknown.headers, body: await unknown.json() }, 404, 'not_found');
        const malformed = await target.fetch(`${target.publicUrl}/api/v1/platforms/not-a-uuid/scopes.yaml`);
        expectError({ status: malformed.status, headers: malformed.headers, body: await malformed.json() }, 422, 'validation_error');
      });
    });

    requestGroup('everything else', () => {
      requestCase('404 not_found for an unknown path', async () => {
        const response = await target.fetch(`${target.publicUrl}/api/v1/nothing-here`);
        expectError({ status: response.status, headers: response.headers, body: await response.json() }, 404, 'not_found');
      });

      requestCase('405 method_not_allowed with Allow for a known path', async () => {
        const get = await target.fetch(`${target.publicUrl}/api/v1/auth/token`);
        expectError({ status: get.status, headers: get.headers, body: await get.json() }, 405, 'method_not_allowed');
        expect(get.headers.get('allow')).toBe('POST');
        const post = await target.fetch(`${target.publicUrl}/.well-known/jwks.json`, { method: 'POST', body: '{}' });
        expect(post.status).toBe(405);
        expect(post.headers.get('allow')).toBe('GET, HEAD');
      });

      requestCase('does not serve the admin API or metrics on the public port', async () => {
        for (const path of ['/admin/v1/platforms', '/metrics', '/readyz']) {
          const response = await target.fetch(`${target.publicUrl}${path}`, { headers: { authorization: `Bearer ${target.adminToken}` } });
          expect(response.status).toBe(404);
        }
      });
    });

    describe('internal port', () => {
      requestCase('refuses the admin API without the right bearer token', async () => {
        for (const authorization of [undefined, 'Bearer wrong', `Bearer ${target.adminToken}x`, target.adminToken]) {
          const response = await target.fetch(`${target.adminUrl}/admin/v1/platforms`, { headers: authorization ? { authorization } : {} });
          expect(response.status).toBe(401);
          expect(((await response.json()) as { error_code: string }).error_code).toBe('unauthorized');
        }
        const unknownPath = await target.fetch(`${target.adminUrl}/admin/v1/unknown`);
        expect(unknownPath.status).toBe(401);
      });

      requestCase('creates a platform with defaults, and refuses a route naming an undefined scope', async () => {
        const created = await admin.request('POST', '/admin/v1/platforms', { name: 'Defaults', scopes: [{ name: 's1' }] });
        expect(created.status).toBe(201);
        expect(created.body).toMatchObject({ name: 'Defaults', status: 'active', verification_status: 'pending', domain: null });
        expect(created.body.platform_id).toMatch(/^[0-9a-f-]{36}$/);
        const fetched = await admin.request('GET', `/admin/v1/platforms/${created.body.platform_id}`);
        expect(fetched.body).toEqual(created.body);
        const bad = await admin.request('POST', '/admin/v1/platforms', {
          name: 'Bad',
          scopes: [{ name: 's1' }],
          routes: [{ method: 'GET', path: '/x', scopes: ['s2'] }],
        });
        expect(bad.status).toBe(422);
        expect(bad.body.error_code).toBe('validation_error');
        expect((await admin.request('GET', `/admin/v1/platforms/${crypto.randomUUID()}`)).status).toBe(404);
      });

      storeCase('shows an agent secret once and never again', async () => {
        const created = await admin.request('POST', '/admin/v1/agents', { name: 'once' });
        expect(created.status).toBe(201);
        expect(created.body.secret).toMatch(/^[A-Za-z0-9_-]{43,}$/); // >= 256 bits, URL-safe
        expect(created.body.api_key_id).toMatch(/^agnt_kid_[0-9a-f]{32}$/);
        expect(created.body.status).toBe('active');
        const fetched = await admin.request('GET', `/admin/v1/agents/${created.body.agent_id}`);
        expect(fetched.status).toBe(200);
        expect(JSON.stringify(fetched.body)).not.toContain(created.body.secret);
        expect(Object.keys(fetched.body)).not.toContain('secret');
        const all = await admin.request('GET', '/admin/v1/agents');
        expect(JSON.stringify(all.body)).not.toContain(created.body.secret);
      });

      requestCase('refuses a grant naming a scope the platform does not define (422), and 404 for unknown ids', async () => {
        const { platform, agent } = await admin.seed(['s1']);
        const bad = await admin.request('PUT', `/admin/v1/agents/${agent.agent_id}/grants/${platform.platform_id}`, { scopes: ['s2'] });
        expect(bad.status).toBe(422);
        const noAgent = await admin.request('PUT', `/admin/v1/agents/${crypto.randomUUID()}/grants/${platform.platform_id}`, { scopes: [] });
        expect(noAgent.status).toBe(404);
      });

      storeCase('replacing platform scopes removes the dropped scopes from every grant', async () => {
        const { platform, agent } = await admin.seed(['keep', 'drop']);
        const body = { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id };
        expect(decodeJwt((await token(body)).body.access_token).scope).toBe('drop keep');
        await admin.patchPlatform(platform.platform_id, { scopes: [{ name: 'keep' }], routes: [] });
        expect(decodeJwt((await token(body)).body.access_token).scope).toBe('keep');
        const grants = await admin.request('GET', `/admin/v1/agents/${agent.agent_id}/grants`);
        expect(grants.body.grants).toEqual([expect.objectContaining({ platform_id: platform.platform_id, scopes: ['keep'] })]);
      });

      storeCase('reports health, readiness and metrics', async () => {
        expect((await target.fetch(`${target.adminUrl}/healthz`)).status).toBe(200);
        const ready = await target.fetch(`${target.adminUrl}/readyz`);
        expect(ready.status).toBe(200);
        const { platform, agent } = await admin.seed();
        await token({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id });
        const text = await (await target.fetch(`${target.adminUrl}/metrics`)).text();
        expect(text).toMatch(/ace_http_requests_total\{route="token",method="POST",status="200"\} [1-9]/);
        expect(text).toMatch(/ace_http_request_duration_seconds_bucket\{le="[^"]+",route="token",method="POST",status="200"\}/);
        expect(text).toMatch(/ace_tokens_issued_total\{outcome="issued"\} [1-9]/);
        expect(text).toMatch(/ace_cache_requests_total\{cache="verified",result="miss"\} [1-9]/);
        if (target.workerPools) {
          expect(text).toMatch(/ace_worker_queue_depth\{pool="argon2"\}/);
          expect(text).toMatch(/ace_worker_task_duration_seconds_count\{pool="sign"\} [1-9]/);
        }
        expect(text).toMatch(/ace_rate_limit_refusals_total\{limiter="token_per_key"\}/);
        expect(text).not.toContain(agent.secret);
        expect(text).not.toContain(agent.api_key_id);
      });
    });
  });
}
