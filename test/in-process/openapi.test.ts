// GET /openapi.json: an OpenAPI 3.1 document generated from the TypeBox schemas the service validates
// with. Every endpoint and every error the contract names is exercised for real here, and each answer
// must be documented (path, method, status) and match the documented schema.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import * as ajvFormats from 'ajv-formats';
import { parse as parseYaml } from 'yaml';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { inProcessApp, type InProcessApp } from '../support/in-process.js';

interface Observed {
  path: string;
  method: string;
  status: number;
  contentType: string;
  body: string;
}

const PUBLIC_BASE_URL = 'https://ace.example.test/exchange';

describe('OpenAPI document', () => {
  let service: InProcessApp;
  let document: any;
  const observed: Observed[] = [];

  beforeAll(async () => {
    service = await inProcessApp({ env: { RATE_LIMIT_TOKEN_POINTS: '2', TRUST_PROXY: 'true', PUBLIC_BASE_URL: PUBLIC_BASE_URL } });
    document = await (await service.fetch(`${service.publicUrl}/openapi.json`)).json();
  });
  afterAll(async () => {
    await service?.close();
  });

  async function call(template: string, path: string, method: string, body?: string, headers: Record<string, string> = {}) {
    const response = await service.fetch(`${service.publicUrl}${path}`, {
      method,
      headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), 'x-forwarded-for': `203.0.113.${observed.length % 250}`, ...headers },
      body,
    });
    observed.push({ path: template, method, status: response.status, contentType: response.headers.get('content-type') ?? '', body: await response.text() });
  }

  it('is OpenAPI 3.1 with the four contract endpoints and the revocation feed', () => {
    expect(document.openapi).toBe('3.1.0');
    expect(Object.keys(document.paths).sort()).toEqual(
      [
        '/.well-known/jwks.json',
        '/.well-known/oauth-authorization-server',
        '/.well-known/ssf-configuration',
        '/oauth2/token',
        '/oauth2/authorize',
        '/api/v1/auth/agents/me/platforms',
        '/api/v1/auth/token',
        '/api/v1/platforms/{platform_id}/scopes.yaml',
        '/api/v1/platforms/{platform_id}/revocations',
        '/api/v1/platforms/{platform_id}/revocations/ws',
        '/openapi.json',
      ].sort(),
    );
    // The token request schema is the validator's own: the api_key_id pattern carries the configured prefix.
    // (A request body's schema sits under requestBodies: generators then read defaulted fields as optional.)
    const tokenRequest = document.components.requestBodies.TokenRequest.content['application/json'].schema;
    expect(document.paths['/api/v1/auth/token'].post.requestBody).toEqual({ $ref: '#/components/requestBodies/TokenRequest' });
    expect(tokenRequest.properties.api_key_id.pattern).toBe('^agnt_kid_[0-9a-f]{32}$');
    expect([...tokenRequest.required].sort()).toEqual(['api_key_id', 'platform_id', 'secret']);
  });

  it('is the checked-in docs/openapi.json, with the configured PUBLIC_BASE_URL as its server', () => {
    const file = JSON.parse(readFileSync(new URL('../../docs/openapi.json', import.meta.url), 'utf8'));
    expect(file.servers.map((s: { url: string }) => s.url)).toEqual(['/']);
    expect(document.servers.map((s: { url: string }) => s.url)).toEqual([PUBLIC_BASE_URL]);
    expect({ ...document, servers: file.servers }).toEqual(file);
  });

  it('declares that no public operation takes HTTP authentication (security: [], as linters require), but the OAuth door (Basic or the form) and the revocation feed (its bearer feed token)', () => {
    const feed = new Set(['/api/v1/platforms/{platform_id}/revocations', '/api/v1/platforms/{platform_id}/revocations/ws']);
    for (const [path, item] of Object.entries<Record<string, any>>(document.paths)) {
      for (const [method, operation] of Object.entries<any>(item)) {
        const expected = path === '/oauth2/token' ? [{ clientSecretBasic: [] }, {}] : feed.has(path) ? [{ feedToken: [] }] : [];
        expect(operation.security, `${method} ${path}`).toEqual(expected);
      }
    }
    expect(document.components.securitySchemes.clientSecretBasic).toMatchObject({ type: 'http', scheme: 'basic' });
    expect(document.components.securitySchemes.feedToken).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(document.components.requestBodies.TokenRequest.content['application/json'].schema.properties.profile.enum).toEqual(['svc-native-jwt', 'oauth-at-jwt']);
    expect(document.info.license.identifier).toBe('Apache-2.0');
  });

  it('documents every real answer of every endpoint, and each body matches its documented schema', async () => {
    const admin = service.admin;
    const { platform, agent } = await admin.seed(['a', 'b'], ['a']);
    const inactive = await admin.createAgent('inactive');
    await admin.grant(inactive.agent_id, platform.platform_id, ['a']);
    await admin.patchAgent(inactive.agent_id, { status: 'inactive' });
    const good = { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id };
    const token = '/api/v1/auth/token';
    const listing = '/api/v1/auth/agents/me/platforms';

    await call(token, token, 'POST', JSON.stringify(good)); // 200
    await call(token, token, 'POST', '{'); // 400
    await call(token, token, 'POST', JSON.stringify({ ...good, secret: 'wrong' })); // 401
    await call(token, token, 'POST', JSON.stringify({ ...good, scopes: ['b'] })); // 403 invalid_scope
    await call(token, token, 'POST', JSON.stringify({ ...good, api_key_id: inactive.api_key_id, secret: inactive.secret })); // 403 inactive
    await call(token, token, 'POST', JSON.stringify({ ...good, pad: 'x'.repeat(20_000) })); // 413
    await call(token, token, 'POST', JSON.stringify(good), { 'content-type': 'text/plain' }); // 415
    await call(token, token, 'POST', JSON.stringify({ ...good, profile: 'oauth-at-jwt-v2' })); // 422 unsupported_profile
    await call(token, token, 'POST', JSON.stringify({ ...good, platform_id: 'nope' })); // 422 validation_error
    await call(token, token, 'POST', JSON.stringify(good)); // 200 (second of two points)
    await call(token, token, 'POST', JSON.stringify(good)); // 429
    await call(listing, listing, 'POST', JSON.stringify({ api_key_id: agent.api_key_id, secret: agent.secret })); // 200
    await call(listing, listing, 'POST', JSON.stringify({ api_key_id: `agnt_kid_${randomBytes(16).toString('hex')}`, secret: 'x' })); // 401
    await call(listing, listing, 'POST', JSON.stringify({ api_key_id: inactive.api_key_id, secret: inactive.secret })); // 403
    await call(listing, listing, 'POST', JSON.stringify({ secret: 'x' })); // 422
    await call('/.well-known/jwks.json', '/.well-known/jwks.json', 'GET'); // 200
    const etag = (await service.fetch(`${service.publicUrl}/.well-known/jwks.json`)).headers.get('etag')!;
    await call('/.well-known/jwks.json', '/.well-known/jwks.json', 'GET', undefined, { 'if-none-match': etag }); // 304
    await call('/.well-known/jwks.json', '/.well-known/jwks.json', 'POST', '{}'); // 405
    const scopes = '/api/v1/platforms/{platform_id}/scopes.yaml';
    await call(scopes, `/api/v1/platforms/${platform.platform_id}/scopes.yaml`, 'GET'); // 200
    await call(scopes, `/api/v1/platforms/${crypto.randomUUID()}/scopes.yaml`, 'GET'); // 404
    await call(scopes, '/api/v1/platforms/not-a-uuid/scopes.yaml', 'GET'); // 422

    const oauth = '/oauth2/token';
    const form = (extra: Record<string, string>) => new URLSearchParams({ grant_type: 'client_credentials', audience: platform.platform_id, ...extra }).toString();
    const formType = { 'content-type': 'application/x-www-form-urlencoded' };
    const post = { client_id: agent.api_key_id, client_secret: agent.secret };
    await call(oauth, oauth, 'POST', form({ client_id: inactive.api_key_id, client_secret: inactive.secret }), formType); // 400 unauthorized_client
    await call(oauth, oauth, 'POST', form({ ...post, client_secret: 'wrong' }), formType); // 401
    await call(oauth, oauth, 'POST', form(post), formType); // 429 (the key's two points are spent above)
    await call(oauth, oauth, 'POST', form({ pad: 'x'.repeat(20_000) }), formType); // 413
    await call('/.well-known/oauth-authorization-server', '/.well-known/oauth-authorization-server', 'GET'); // 200

    const seen = new Set(observed.map((o) => `${o.method} ${o.path} ${o.status}`));
    for (const expected of ['400', '401', '413', '429']) expect(seen).toContain(`POST ${oauth} ${expected}`);
    for (const expected of ['200', '400', '401', '403', '413', '415', '422', '429']) expect(seen).toContain(`POST ${token} ${expected}`);
    for (const expected of ['200', '401', '403', '422']) expect(seen).toContain(`POST ${listing} ${expected}`);
    expect(seen).toContain('GET /.well-known/jwks.json 304');
    expect(seen).toContain('POST /.well-known/jwks.json 405');
    for (const expected of ['200', '404', '422']) expect(seen).toContain(`GET ${scopes} ${expected}`);

    const ajv = new Ajv2020({ strict: false });
    (ajvFormats.default as unknown as (a: Ajv2020) => void)(ajv);
    ajv.addSchema({ $id: 'openapi', components: document.components });
    for (const o of observed) {
      // A 405 answers a method the path has no operation for: it is documented on the path's operations.
      const operation = document.paths[o.path]?.[o.method.toLowerCase()] ?? (o.status === 405 ? Object.values<any>(document.paths[o.path] ?? {})[0] : undefined);
      expect(operation, `${o.method} ${o.path} documented`).toBeDefined();
      const response = operation.responses[String(o.status)];
      expect(response, `${o.method} ${o.path} ${o.status} documented`).toBeDefined();
      if (!response.content) {
        expect(o.body).toBe('');
        continue;
      }
      const [mediaType, media] = Object.entries(response.content)[0] as [string, { schema: { $ref: string } }];
      expect(o.contentType.startsWith(mediaType), `${o.status} content type ${o.contentType} vs ${mediaType}`).toBe(true);
      const value = mediaType === 'text/yaml' ? parseYaml(o.body) : JSON.parse(o.body);
      const validate = ajv.getSchema(`openapi${media.schema.$ref}`)!;
      expect(validate(value), `${o.method} ${o.path} ${o.status}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    }
  });
});
