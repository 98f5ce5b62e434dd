// Workload identity federation, through the real HTTP interface on Postgres + Redis: two issuers run here —
// one shaped like a Kubernetes service-account token issuer (a projected token: RS256, `aud` our issuer,
// `sub` system:serviceaccount:<ns>:<name>, its keys behind a jwks_uri) and one issuing SPIFFE JWT-SVIDs
// (ES256, `sub` spiffe://<trust domain>/<path>, its bundle registered inline). A workload presents its token as
// the client assertion and gets its bound agent's token; nobody else does.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { AdminClient, type PlatformRecord } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { call, msUntilRefused, startPlatform, type Platform } from '../support/revocation.js';

const ISSUER = 'https://ace.test.example';
const K8S_ISSUER = 'https://kubernetes.default.svc.cluster.local';
const SPIFFE_ISSUER = 'https://spire.example.org';

let service: ServiceHandle;
let admin: AdminClient;
let shop: PlatformRecord;
let platform: Platform;

/** A token issuer with a JWKS endpoint whose keys can be rotated. */
interface TestIssuer {
  iss: string;
  alg: 'RS256' | 'ES256';
  key: { privateKey: CryptoKey; kid: string };
  keys: JWK[];
  jwksUrl: string;
  fetches: number;
  rotate(): Promise<void>;
  close(): Promise<void>;
}

async function startIssuer(iss: string, alg: 'RS256' | 'ES256'): Promise<TestIssuer> {
  const newKey = async () => {
    const { publicKey, privateKey } = await generateKeyPair(alg);
    const kid = randomBytes(6).toString('hex');
    return { privateKey, kid, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
  };
  const first = await newKey();
  const issuer = {
    iss,
    alg,
    key: { privateKey: first.privateKey, kid: first.kid },
    keys: [first.jwk] as JWK[],
    jwksUrl: '',
    fetches: 0,
  } as TestIssuer;
  const server = http.createServer((req, res) => {
    issuer.fetches++;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ keys: issuer.keys }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer.jwksUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/openid/v1/jwks`;
  issuer.rotate = async () => {
    const next = await newKey();
    issuer.keys = [...issuer.keys, next.jwk];
    issuer.key = { privateKey: next.privateKey, kid: next.kid };
  };
  issuer.close = () => new Promise((resolve) => server.close(() => resolve()));
  return issuer;
}

/** A projected service-account token as the kubelet mounts it (claims as Kubernetes 1.30 issues them). */
function serviceAccountToken(issuer: TestIssuer, namespace: string, name: string, o: { aud?: string | string[]; expIn?: number } = {}) {
  return new SignJWT({
    'kubernetes.io': { namespace, serviceaccount: { name, uid: randomUUID() }, pod: { name: `${name}-7d9f8`, uid: randomUUID() } },
    jti: randomUUID(),
  })
    .setProtectedHeader({ alg: issuer.alg, kid: issuer.key.kid })
    .setIssuer(issuer.iss)
    .setSubject(`system:serviceaccount:${namespace}:${name}`)
    .setAudience(o.aud ?? ISSUER)
    .setIssuedAt()
    .setNotBefore('0s')
    .setExpirationTime(Math.floor(Date.now() / 1000) + (o.expIn ?? 3600))
    .sign(issuer.key.privateKey);
}

/** A SPIFFE JWT-SVID (SPIFFE JWT-SVID spec: sub the SPIFFE ID, aud, exp; SPIRE sets iss when jwt_issuer is configured). */
function jwtSvid(issuer: TestIssuer, spiffeId: string, o: { aud?: string; expIn?: number } = {}) {
  return new SignJWT({})
    .setProtectedHeader({ alg: issuer.alg, kid: issuer.key.kid, typ: 'JWT' })
    .setIssuer(issuer.iss)
    .setSubject(spiffeId)
    .setAudience(o.aud ?? ISSUER)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + (o.expIn ?? 300))
    .sign(issuer.key.privateKey);
}

async function exchange(assertion: string, extra: Record<string, string> = {}) {
  const response = await fetch(`${service.publicUrl}/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: assertion,
      resource: `urn:uuid:${shop.platform_id}`,
      ...extra,
    }).toString(),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

const subOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()).sub as string;

let k8s: TestIssuer;
let spire: TestIssuer;
let k8sIssuerId: string;
let spireIssuerId: string;
let billing: { agent_id: string; api_key_id: string };
let reports: { agent_id: string; api_key_id: string };

beforeAll(async () => {
  [k8s, spire] = await Promise.all([startIssuer(K8S_ISSUER, 'RS256'), startIssuer(SPIFFE_ISSUER, 'ES256')]);
  // Loopback jwks_uri allowed for the test issuers (an explicit setting; the default refuses them).
  service = await startService({ mode: 'real', env: { ISSUER, JWKS_URI_ALLOW_LOOPBACK: 'true', JWKS_URI_CACHE_SECONDS: '600', JWKS_URI_COOLDOWN_SECONDS: '0' } });
  admin = new AdminClient(service);
  shop = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'read' }] });
  billing = await admin.createAgent('billing-worker');
  reports = await admin.createAgent('reports-job');
  for (const agent of [billing, reports]) await admin.grant(agent.agent_id, shop.platform_id, ['read']);
  k8sIssuerId = (await admin.call('POST', '/admin/v1/workload-issuers', { issuer: K8S_ISSUER, audience: ISSUER, jwks_uri: k8s.jwksUrl }, 201)).issuer_id;
  spireIssuerId = (await admin.call('POST', '/admin/v1/workload-issuers', { issuer: SPIFFE_ISSUER, audience: ISSUER, jwks: { keys: spire.keys } }, 201)).issuer_id;
  await admin.call('POST', `/admin/v1/workload-issuers/${k8sIssuerId}/bindings`, { subject: 'system:serviceaccount:payments:billing', agent_id: billing.agent_id }, 201);
  await admin.call('POST', `/admin/v1/workload-issuers/${spireIssuerId}/bindings`, { subject: 'spiffe://example.org/ns/analytics/sa/reports', agent_id: reports.agent_id }, 201);
  platform = await startPlatform({ serviceUrl: service.publicUrl, platformId: shop.platform_id, issuer: ISSUER, feedToken: await admin.feedToken(shop.platform_id) });
}, 120_000);

afterAll(async () => {
  await platform?.close();
  await service?.dispose();
  await Promise.all([k8s?.close(), spire?.close()]);
});

describe('workload identity federation (Kubernetes service-account tokens, SPIFFE JWT-SVIDs)', () => {
  it("a bound Kubernetes service account gets its agent's token, and presents the same projected token again", async () => {
    const projected = await serviceAccountToken(k8s, 'payments', 'billing');
    // Our audience alone, as a string or a one-element array.
    for (const jwt of [projected, projected, await serviceAccountToken(k8s, 'payments', 'billing', { aud: [ISSUER] })]) {
      const { status, body } = await exchange(jwt);
      expect(status, JSON.stringify(body)).toBe(200);
      expect(subOf(body.access_token)).toBe(billing.agent_id);
      expect((await call(platform.url, body.access_token)).status).toBe(200);
    }
  });

  it("a bound SPIFFE ID gets its agent's token (client_id may name the agent)", async () => {
    const svid = await jwtSvid(spire, 'spiffe://example.org/ns/analytics/sa/reports');
    const { status, body } = await exchange(svid, { client_id: reports.api_key_id });
    expect(status, JSON.stringify(body)).toBe(200);
    expect(subOf(body.access_token)).toBe(reports.agent_id);
  });

  it('refuses unbound subjects, other audiences, expired tokens, a mismatched client_id and forged issuers alike', async () => {
    const forger = await startIssuer(K8S_ISSUER, 'RS256');
    try {
      const cases: Record<string, Promise<string> | string> = {
        'unbound service account': serviceAccountToken(k8s, 'payments', 'someone-else'),
        'bound subject, other namespace': serviceAccountToken(k8s, 'default', 'billing'),
        'audience of another service': serviceAccountToken(k8s, 'payments', 'billing', { aud: 'https://vault.example' }),
        // Any other audience of such a token (here a vault) could present it as the agent.
        'our audience and another service': serviceAccountToken(k8s, 'payments', 'billing', { aud: ['https://vault.example', ISSUER] }),
        expired: serviceAccountToken(k8s, 'payments', 'billing', { expIn: -300 }),
        'lifetime beyond the bound': jwtSvid(spire, 'spiffe://example.org/ns/analytics/sa/reports', { expIn: 30 * 86_400 }),
        "the Kubernetes issuer's name, another key": serviceAccountToken(forger, 'payments', 'billing'),
        "a SPIFFE ID bound under the other issuer": serviceAccountToken(k8s, 'analytics', 'reports'),
      };
      const bodies = new Set<string>();
      for (const [name, jwt] of Object.entries(cases)) {
        const { status, body } = await exchange(await jwt);
        expect(status, `${name}: ${JSON.stringify(body)}`).toBe(401);
        expect(body.error).toBe('invalid_client');
        bodies.add(JSON.stringify(body));
      }
      const mismatch = await exchange(await serviceAccountToken(k8s, 'payments', 'billing'), { client_id: reports.api_key_id });
      expect(mismatch.status).toBe(401);
      bodies.add(JSON.stringify(mismatch.body));
      expect(bodies.size).toBe(1);
    } finally {
      await forger.close();
    }
  });

  it("follows the issuer's key rotation: an unknown kid fetches its jwks_uri again", async () => {
    const before = k8s.fetches;
    await k8s.rotate();
    const { status } = await exchange(await serviceAccountToken(k8s, 'payments', 'billing'));
    expect(status).toBe(200);
    expect(k8s.fetches).toBeGreaterThan(before);
  });

  it("unbinding takes the workload's tokens back at the platform within a second, and it gets no new one", async () => {
    const { body } = await exchange(await jwtSvid(spire, 'spiffe://example.org/ns/analytics/sa/reports'));
    const accessToken = body.access_token as string;
    expect((await call(platform.url, accessToken)).status).toBe(200);
    const at = Date.now();
    await admin.call('DELETE', `/admin/v1/workload-issuers/${spireIssuerId}/bindings?subject=${encodeURIComponent('spiffe://example.org/ns/analytics/sa/reports')}`, undefined, 204);
    expect(await msUntilRefused(platform.url, accessToken, at, 5000)).toBeLessThan(1500);
    expect((await exchange(await jwtSvid(spire, 'spiffe://example.org/ns/analytics/sa/reports'))).status).toBe(401);
    const events = await admin.call('GET', `/admin/v1/events?type=workload_binding.created,workload_binding.deleted&agent_id=${reports.agent_id}`);
    expect(events.events.map((e: { type: string }) => e.type)).toEqual(['workload_binding.created', 'workload_binding.deleted']);
  });
});

describe('SPIFFE bundles as SPIRE publishes them (issue 40 item 4)', () => {
  it('a trust bundle with x509-svid and jwt-svid keys registers as published; a JWT-SVID naming its kid gets the bound agent\'s token', async () => {
    const trustDomainIssuer = 'https://oidc-discovery.spire.example.net';
    const { publicKey, privateKey } = await generateKeyPair('ES256');
    const x509 = await generateKeyPair('ES256');
    // SPIRE's key ids: 32 random letters and digits.
    const kid = randomBytes(24).toString('base64').replace(/[^A-Za-z0-9]/g, '').slice(0, 32);
    const bundle = {
      keys: [
        { use: 'x509-svid', ...(await exportJWK(x509.publicKey)), x5c: [randomBytes(420).toString('base64')] },
        { use: 'jwt-svid', kid, ...(await exportJWK(publicKey)) },
      ],
      spiffe_sequence: 7,
      spiffe_refresh_hint: 300,
    };
    const created = await admin.call('POST', '/admin/v1/workload-issuers', { issuer: trustDomainIssuer, audience: ISSUER, jwks: bundle }, 201);
    // Kept: the key for JWTs, its kid as published.
    expect(created.jwks.keys).toEqual([expect.objectContaining({ kid, kty: 'EC', use: 'sig' })]);
    const runner = await admin.createAgent('ci-runner');
    await admin.grant(runner.agent_id, shop.platform_id, ['read']);
    const spiffeId = 'spiffe://example.net/ns/ci/sa/runner';
    await admin.call('POST', `/admin/v1/workload-issuers/${created.issuer_id}/bindings`, { subject: spiffeId, agent_id: runner.agent_id }, 201);
    // A JWT-SVID as SPIRE mints it with jwt_issuer set: aud always an array, no jti, typ JWT.
    const now = Math.floor(Date.now() / 1000);
    const svid = await new SignJWT({ aud: [ISSUER] })
      .setProtectedHeader({ alg: 'ES256', kid, typ: 'JWT' })
      .setIssuer(trustDomainIssuer)
      .setSubject(spiffeId)
      .setIssuedAt(now)
      .setExpirationTime(now + 300)
      .sign(privateKey);
    const { status, body } = await exchange(svid);
    expect(status, JSON.stringify(body)).toBe(200);
    expect(subOf(body.access_token)).toBe(runner.agent_id);
    expect((await call(platform.url, body.access_token)).status).toBe(200);
  });

  it('a bundle with only X.509-SVID keys, or a jwt-svid key without kid, is refused with a clear 422', async () => {
    const { publicKey } = await generateKeyPair('ES256');
    const jwk = await exportJWK(publicKey);
    for (const [keys, detail] of [
      [[{ use: 'x509-svid', ...jwk, x5c: [randomBytes(100).toString('base64')] }], /no key for JWTs/],
      [[{ use: 'jwt-svid', ...jwk }], /kid/],
    ] as const) {
      const refused = await admin.call('POST', '/admin/v1/workload-issuers', { issuer: `https://spire-${randomUUID()}.example`, audience: ISSUER, jwks: { keys } }, 422);
      expect(refused.error_code).toBe('validation_error');
      expect(refused.detail).toMatch(detail);
    }
  });
});

describe('the jwt-bearer grant (RFC 7523 §2.1; MCP workload identity federation, SEP-1933; issue 40 item 2)', () => {
  const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
  const grant = async (fields: Record<string, string>, headers: Record<string, string> = {}) => {
    const response = await fetch(`${service.publicUrl}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: new URLSearchParams(fields).toString(),
    });
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };

  it("a bound workload's token as the grant, with resource and scope, gets its agent's token; the metadata lists the grant", async () => {
    const metadata = (await (await fetch(`${service.publicUrl}/.well-known/oauth-authorization-server`)).json()) as { grant_types_supported: string[] };
    expect(metadata.grant_types_supported).toContain(JWT_BEARER);
    const projected = await serviceAccountToken(k8s, 'payments', 'billing');
    const { status, body } = await grant({ grant_type: JWT_BEARER, assertion: projected, resource: `urn:uuid:${shop.platform_id}`, scope: 'read' });
    expect(status, JSON.stringify(body)).toBe(200);
    expect(body).toMatchObject({ token_type: 'Bearer', scope: 'read' });
    const claims = JSON.parse(Buffer.from(body.access_token.split('.')[1], 'base64url').toString());
    expect(claims.sub).toBe(billing.agent_id);
    expect([claims.aud].flat()).toContain(`urn:uuid:${shop.platform_id}`);
    expect((await call(platform.url, body.access_token)).status).toBe(200);
    // A SPIFFE JWT-SVID too (a subject of its own: the unbinding test took the first one), with the bound agent's client_id beside it.
    await admin.call('POST', `/admin/v1/workload-issuers/${spireIssuerId}/bindings`, { subject: 'spiffe://example.org/ns/analytics/sa/reports-grant', agent_id: reports.agent_id }, 201);
    const svid = await grant({ grant_type: JWT_BEARER, assertion: await jwtSvid(spire, 'spiffe://example.org/ns/analytics/sa/reports-grant'), client_id: reports.api_key_id, resource: `urn:uuid:${shop.platform_id}` });
    expect(svid.status, JSON.stringify(svid.body)).toBe(200);
    expect(subOf(svid.body.access_token)).toBe(reports.agent_id);
  });

  it("refuses as invalid_grant what is no valid grant: an unbound subject, a forged or expired token, another client_id, a key agent's own assertion", async () => {
    const keyed = await generateKeyPair('ES256');
    const keyAgent = await admin.call('POST', '/admin/v1/agents', { name: 'keyed-grant', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [{ ...(await exportJWK(keyed.publicKey)), kid: 'g1', alg: 'ES256' }] } }, 201);
    await admin.grant(keyAgent.agent_id, shop.platform_id, ['read']);
    const now = Math.floor(Date.now() / 1000);
    const ownAssertion = await new SignJWT({ jti: randomUUID() })
      .setProtectedHeader({ alg: 'ES256', kid: 'g1' })
      .setIssuer(keyAgent.api_key_id)
      .setSubject(keyAgent.api_key_id)
      .setAudience(ISSUER)
      .setIssuedAt(now)
      .setExpirationTime(now + 60)
      .sign(keyed.privateKey);
    // The same assertion is a valid client assertion: it is refused as a grant only.
    const cases: Record<string, Record<string, string>> = {
      'unbound subject': { assertion: await serviceAccountToken(k8s, 'payments', 'someone-else') },
      expired: { assertion: await serviceAccountToken(k8s, 'payments', 'billing', { expIn: -300 }) },
      "another bound agent's client_id": { assertion: await serviceAccountToken(k8s, 'payments', 'billing'), client_id: reports.api_key_id },
      "a key agent's own assertion": { assertion: ownAssertion },
      'not a JWT': { assertion: 'not-a-jwt' },
    };
    for (const [name, fields] of Object.entries(cases)) {
      const { status, body } = await grant({ grant_type: JWT_BEARER, resource: `urn:uuid:${shop.platform_id}`, ...fields });
      expect(status, `${name}: ${JSON.stringify(body)}`).toBe(400);
      expect(body.error, name).toBe('invalid_grant');
    }
    const { status } = await exchange(await new SignJWT({ jti: randomUUID() })
      .setProtectedHeader({ alg: 'ES256', kid: 'g1' })
      .setIssuer(keyAgent.api_key_id)
      .setSubject(keyAgent.api_key_id)
      .setAudience(ISSUER)
      .setIssuedAt(now)
      .setExpirationTime(now + 60)
      .sign(keyed.privateKey));
    expect(status).toBe(200);
  });

  it('refuses a second credential beside the grant, and a grant without its assertion, as invalid_request', async () => {
    const projected = await serviceAccountToken(k8s, 'payments', 'billing');
    const basic = `Basic ${Buffer.from(`${billing.api_key_id}:nope`).toString('base64')}`;
    for (const [fields, headers] of [
      [{ assertion: projected, client_secret: 'nope', client_id: billing.api_key_id }, {}],
      [{ assertion: projected }, { authorization: basic }],
      [{ assertion: projected, client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: projected }, {}],
      [{}, {}],
    ] as [Record<string, string>, Record<string, string>][]) {
      const { status, body } = await grant({ grant_type: JWT_BEARER, resource: `urn:uuid:${shop.platform_id}`, ...fields }, headers);
      expect(status, JSON.stringify(body)).toBe(400);
      expect(body.error).toBe('invalid_request');
    }
  });
});
