// The public contract end to end in a service process, run twice: against real Postgres + Redis, and
// against the embedded default (PGlite, in-process cache and limiter). What depends on the stores, the
// worker pools or a real socket: issuance verified with the served JWKS, changes that must win over the
// caches, the limits (Redis or in-process), listings and scope files read from the store, a body streamed
// over a socket, health, readiness and metrics. The request handling itself (validation, refusals, every
// error shape, 404/405, the admin API's checks) runs in process: test/in-process/contract.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, decodeJwt } from 'jose';
import { parse as parseYaml } from 'yaml';
import { Ajv } from 'ajv';
import * as ajvFormats from 'ajv-formats';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { SvcScopesYaml } from '../../packages/middleware/src/scopes-file.js';
import { AdminClient, postJson } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';

const TOKEN_LIMIT = 6;
const FAIL_LIMIT = 4;
let addressCounter = 0;
/** A fresh client address per use (the service trusts X-Forwarded-For in these tests). */
const freshAddress = () => `198.51.100.${++addressCounter}`;

for (const mode of ['real', 'embedded'] as const) {
  describe(`public contract (${mode})`, () => {
    let service: ServiceHandle;
    let admin: AdminClient;

    beforeAll(async () => {
      service = await startService({
        mode,
        env: {
          TRUST_PROXY: 'true',
          RATE_LIMIT_TOKEN_POINTS: String(TOKEN_LIMIT),
          RATE_LIMIT_AUTH_FAIL_POINTS: String(FAIL_LIMIT),
        },
      });
      admin = new AdminClient(service);
    });
    afterAll(async () => {
      await service?.dispose();
    });

    const token = (body: unknown, address = freshAddress(), headers: Record<string, string> = {}) =>
      postJson(`${service.publicUrl}/api/v1/auth/token`, body, { 'x-forwarded-for': address, ...headers });
    const listing = (body: unknown, address = freshAddress()) =>
      postJson(`${service.publicUrl}/api/v1/auth/agents/me/platforms`, body, { 'x-forwarded-for': address });
    const jwks = async () => createLocalJWKSet((await (await fetch(`${service.publicUrl}/.well-known/jwks.json`)).json()) as Parameters<typeof createLocalJWKSet>[0]);
    const expectError = (response: { status: number; body: any; headers: Headers }, status: number, code: string) => {
      expect(response.status).toBe(status);
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      expect(Object.keys(response.body).sort()).toEqual(['detail', 'error_code']);
      expect(response.body.error_code).toBe(code);
      expect(typeof response.body.detail).toBe('string');
      expect(response.body.detail.length).toBeGreaterThan(0);
    };

    describe('POST /api/v1/auth/token', () => {
      it('issues an RS256 JWT with exactly the decided claims, verifiable with the served JWKS', async () => {
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
        expect(payload.iss).toBe(`http://127.0.0.1:${service.env.PORT}`);
        expect(Math.abs(payload.iat! - Date.now() / 1000)).toBeLessThan(30);
        const again = await token({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id });
        expect(decodeJwt(again.body.access_token).jti).not.toBe(payload.jti);
      });

      it('gives 403 agent_inactive for an inactive agent, and works again once reactivated', async () => {
        const { platform, agent } = await admin.seed();
        const body = { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id };
        expect((await token(body)).status).toBe(200); // now remembered as verified: the change must still win
        await admin.patchAgent(agent.agent_id, { status: 'inactive' });
        expectError(await token(body), 403, 'agent_inactive');
        await admin.patchAgent(agent.agent_id, { status: 'active' });
        expect((await token(body)).status).toBe(200);
      });

      it('stops issuing at once when the grant is removed', async () => {
        const { platform, agent } = await admin.seed();
        const body = { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id };
        expect((await token(body)).status).toBe(200);
        await admin.revoke(agent.agent_id, platform.platform_id);
        expectError(await token(body), 403, 'platform_access_denied');
      });

      it('rate-limits per api_key_id with 429 and an integer Retry-After', async () => {
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

      it('limits failed authentications per client address with 429', async () => {
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
        it('413 also when the body is streamed without a declared length, then closes the connection', async () => {
          // A raw socket: fetch clients report EPIPE when the server answers and closes mid-upload.
          // 2 MiB, so the client is still writing when the limit is crossed: a server that closes at once
          // (reset, unread bytes) loses the 413 more often than not; it must wait until the client stops.
          const { port } = new URL(service.publicUrl);
          const answer = await new Promise<string>((resolve, reject) => {
            const socket = net.connect(Number(port), '127.0.0.1');
            let received = '';
            socket.on('data', (d) => (received += d));
            socket.on('close', () => resolve(received));
            socket.on('error', () => resolve(received));
            socket.setTimeout(10_000, () => reject(new Error('no answer')));
            socket.write('POST /api/v1/auth/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
            const chunk = 'z'.repeat(4096);
            let sent = 0;
            const pump = () => {
              if (socket.destroyed || sent > 512) return;
              sent++;
              socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`, () => setImmediate(pump));
            };
            pump();
          });
          expect(answer).toMatch(/^HTTP\/1\.1 413 /);
          expect(answer).toContain('"error_code":"payload_too_large"');
        });


      });
    });

    describe('POST /api/v1/auth/agents/me/platforms', () => {
      it('lists every granted platform with sorted scopes, status and enrichment; hostname only when verified', async () => {
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

    });

    describe('GET /.well-known/jwks.json', () => {
      it("lists the active key first: the one tokens are signed with", async () => {
        const { platform, agent } = await admin.seed();
        const issued = await token({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id });
        const body = (await (await fetch(`${service.publicUrl}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] };
        expect(body.keys[0].kid).toBe(decodeProtectedHeader(issued.body.access_token).kid);
      });
    });

    describe('GET /api/v1/platforms/{platform_id}/scopes.yaml', () => {
      it('serves an SvcScopesYaml v1 document that validates against the schema', async () => {
        const platform = await admin.createPlatform({
          name: 'Orders',
          scopes: [{ name: 'orders:read', description: 'Read orders' }, { name: 'orders:write' }],
          routes: [
            { method: 'get', path: '/orders/{id}', scopes: ['orders:read'] },
            { method: 'POST', path: '/orders', scopes: ['orders:write'] },
          ],
        });
        const response = await fetch(`${service.publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`);
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
        const again = await fetch(`${service.publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`, {
          headers: { 'if-none-match': etag },
        });
        expect(again.status).toBe(304);
        // A change gives a new document and a new ETag.
        await admin.patchPlatform(platform.platform_id, { routes: [] });
        const changed = await fetch(`${service.publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`, {
          headers: { 'if-none-match': etag },
        });
        expect(changed.status).toBe(200);
        expect(parseYaml(await changed.text()).routes).toEqual([]);
      });
    });

    describe('internal port', () => {
      it('shows an agent secret once and never again', async () => {
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

      it('replacing platform scopes removes the dropped scopes from every grant', async () => {
        const { platform, agent } = await admin.seed(['keep', 'drop']);
        const body = { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id };
        expect(decodeJwt((await token(body)).body.access_token).scope).toBe('drop keep');
        await admin.patchPlatform(platform.platform_id, { scopes: [{ name: 'keep' }], routes: [] });
        expect(decodeJwt((await token(body)).body.access_token).scope).toBe('keep');
        const grants = await admin.request('GET', `/admin/v1/agents/${agent.agent_id}/grants`);
        expect(grants.body.grants).toEqual([expect.objectContaining({ platform_id: platform.platform_id, scopes: ['keep'] })]);
      });

      it('reports health, readiness and metrics', async () => {
        expect((await fetch(`${service.adminUrl}/healthz`)).status).toBe(200);
        const ready = await fetch(`${service.adminUrl}/readyz`);
        expect(ready.status).toBe(200);
        const { platform, agent } = await admin.seed();
        await token({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id });
        const text = await (await fetch(`${service.adminUrl}/metrics`)).text();
        expect(text).toMatch(/ace_http_requests_total\{route="token",method="POST",status="200"\} [1-9]/);
        expect(text).toMatch(/ace_http_request_duration_seconds_bucket\{le="[^"]+",route="token",method="POST",status="200"\}/);
        expect(text).toMatch(/ace_tokens_issued_total\{outcome="issued"\} [1-9]/);
        expect(text).toMatch(/ace_worker_queue_depth\{pool="argon2"\}/);
        expect(text).toMatch(/ace_worker_task_duration_seconds_count\{pool="sign"\} [1-9]/);
        expect(text).toMatch(/ace_cache_requests_total\{cache="verified",result="miss"\} [1-9]/);
        expect(text).toMatch(/ace_rate_limit_refusals_total\{limiter="token_per_key"\}/);
        expect(text).not.toContain(agent.secret);
        expect(text).not.toContain(agent.api_key_id);
      });
    });
  });
}
