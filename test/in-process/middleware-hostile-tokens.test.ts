// The verifier's part: tokens validly signed by the service's key (here a key pair of the test,
// published on a real JWKS endpoint) but hostile in shape. Each goes through a real Express app guarded by
// the middleware: an `iat` an hour ahead, a `typ` that does not match the token's profile, and tokens over
// the 8 KiB cap (refused before they are decoded: an unknown kid in one does not even cost a JWKS fetch).
import http from 'node:http';
import type { webcrypto } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import express from 'express';
import { exportJWK, generateKeyPair, SignJWT, type JWTPayload } from 'jose';
import { agentOf, createVerifier, expressAgentAuth, MAX_TOKEN_LENGTH, type Verifier } from '../../packages/middleware/src/index.js';

const PLATFORM = '8d7b4f2e-3c1a-4e5b-9f60-1a2b3c4d5e6f';
let issuer: string;
let appUrl: string;
let jwksRequests = 0;
let privateKey: webcrypto.CryptoKey;
let verifier: Verifier;
const servers: http.Server[] = [];

async function listen(server: http.Server): Promise<string> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

interface TokenShape {
  /** null: no typ header at all. */
  typ?: string | null;
  kid?: string;
  claims?: JWTPayload;
  iat?: number;
}

/** A token as the service signs it (typ JWT, svc-native-jwt profile), with the given changes. */
function token({ typ = 'JWT', kid = 'k1', claims = {}, iat = Math.floor(Date.now() / 1000) }: TokenShape = {}): Promise<string> {
  const header = typ === null ? { alg: 'RS256', kid } : { alg: 'RS256', kid, typ };
  return new SignJWT({ scope: 'orders:read', svc_token_profile: 'svc-native-jwt', ...claims })
    .setProtectedHeader(header)
    .setIssuer(issuer)
    .setAudience(PLATFORM)
    .setSubject('agent-1')
    .setIssuedAt(iat)
    .setExpirationTime(iat + 3 * 3600)
    .sign(privateKey);
}

async function call(bearer: string): Promise<{ status: number; body: { detail?: string; error_code?: string; agent?: string } }> {
  const response = await fetch(`${appUrl}/orders/1`, { headers: { authorization: `Bearer ${bearer}` } });
  return { status: response.status, body: (await response.json()) as { detail?: string } };
}

beforeAll(async () => {
  const keys = await generateKeyPair('RS256', { extractable: true });
  privateKey = keys.privateKey;
  const jwk = { ...(await exportJWK(keys.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  issuer = await listen(
    http.createServer((req, res) => {
      if (req.url !== '/.well-known/jwks.json') return res.writeHead(404).end();
      jwksRequests++;
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=300' }).end(JSON.stringify({ keys: [jwk] }));
    }),
  );
  verifier = createVerifier({
    serviceUrl: issuer,
    scopesDocument: { schema: 'SvcScopesYaml', version: 1, platform_id: PLATFORM, scopes: [], routes: [{ method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] }] },
    revocationFeed: false,
    jwksCooldownSeconds: 0,
  });
  const app = express();
  app.use(expressAgentAuth(verifier));
  app.get('/orders/:id', (req, res) => {
    res.json({ agent: agentOf(req).agentId });
  });
  // Large enough for the 200 KB token to reach the middleware (Node's own default limit is 16 KiB).
  appUrl = await listen(http.createServer({ maxHeaderSize: 1024 * 1024 }, app));
});

afterAll(() => {
  verifier?.close();
  for (const server of servers) server.close();
});

describe('hostile but validly signed tokens, through Express', () => {
  it('a token as the service issues it passes (the control)', async () => {
    expect(await call(await token())).toEqual({ status: 200, body: { agent: 'agent-1' } });
  });

  it('refuses an iat beyond the clock leeway (one hour ahead), accepts one within it', async () => {
    const now = Math.floor(Date.now() / 1000);
    const ahead = await call(await token({ iat: now + 3600 }));
    expect(ahead).toEqual({ status: 401, body: { detail: 'The access token is issued in the future.', error_code: 'invalid_token' } });
    // Within the default 5 s leeway: clock drift between the service and the platform.
    expect((await call(await token({ iat: now + 3 }))).status).toBe(200);
  });

  it('checks typ against the svc_token_profile claim', async () => {
    const refused = { status: 401, body: { detail: 'The access token has a type (typ) that does not match its profile.', error_code: 'invalid_token' } };
    for (const typ of [null, 'at+jwt', 'application/at+jwt', 'secevent+jwt', 'JOSE']) {
      expect([typ, await call(await token({ typ }))]).toEqual([typ, refused]);
    }
    expect((await call(await token({ typ: 'jwt' }))).status).toBe(200); // typ is case-insensitive (RFC 7515)
    // RFC 9068 access tokens: "at+jwt", or its full media type; never plain "JWT".
    const rfc9068 = { svc_token_profile: 'oauth-at-jwt' };
    expect((await call(await token({ typ: 'at+jwt', claims: rfc9068 }))).status).toBe(200);
    expect((await call(await token({ typ: 'application/at+jwt', claims: rfc9068 }))).status).toBe(200);
    expect(await call(await token({ typ: 'JWT', claims: rfc9068 }))).toEqual(refused);
    // A profile the verifier does not know, or none: not a token of the service.
    const unknown = { status: 401, body: { detail: 'The access token has an unknown profile.', error_code: 'invalid_token' } };
    expect(await call(await token({ claims: { svc_token_profile: 'something-else' } }))).toEqual(unknown);
    expect(await call(await token({ claims: { svc_token_profile: undefined } }))).toEqual(unknown);
  });

  it(`refuses tokens over ${MAX_TOKEN_LENGTH} bytes before decoding them, accepts one just under`, async () => {
    const padded = async (length: number, kid = 'k1') => {
      const base = await token({ kid, claims: { pad: '' } });
      const padding = 'x'.repeat(Math.floor(((length - base.length) * 3) / 4));
      const signed = await token({ kid, claims: { pad: padding } });
      return signed;
    };
    const under = await padded(MAX_TOKEN_LENGTH - 8);
    expect(under.length).toBeLessThanOrEqual(MAX_TOKEN_LENGTH);
    expect(under.length).toBeGreaterThan(MAX_TOKEN_LENGTH - 16);
    expect((await call(under)).status).toBe(200);

    const tooLarge = { status: 401, body: { detail: `The access token is larger than ${MAX_TOKEN_LENGTH} bytes.`, error_code: 'invalid_token' } };
    const over = await padded(MAX_TOKEN_LENGTH + 16);
    expect(over.length).toBeGreaterThan(MAX_TOKEN_LENGTH);
    expect(await call(over)).toEqual(tooLarge);

    // 200 KB, validly signed with a kid the JWKS lacks: decoding it would refetch the key set.
    const huge = await padded(200 * 1024, 'k-unknown');
    expect(huge.length).toBeGreaterThan(199 * 1024);
    const before = jwksRequests;
    expect(await call(huge)).toEqual(tooLarge);
    expect(jwksRequests).toBe(before);
  });
});
