// failMode "open" accepts tokens for at most openForAtMostSeconds past staleAfterSeconds: the warning says
// so itself, with the instant from which tokens are refused, so an operator reading the log knows the deadline.
import { describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { createVerifier } from '../../packages/middleware/src/edge.js';

const PLATFORM = '6f1c7f0e-1d2b-4c3a-9e8f-0a1b2c3d4e5f';
const ISSUER = 'https://ace.test';

describe('the fail-open warning', () => {
  it('names openForAtMostSeconds and the instant from which tokens are refused', async () => {
    const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    // The JWKS answers; the revocation feed does not (a service behind a broken proxy).
    const fetchStub = (async (input: string | URL | Request) =>
      String(input).includes('jwks')
        ? new Response(JSON.stringify({ keys: [jwk] }), { headers: { 'content-type': 'application/json' } })
        : new Response('bad gateway', { status: 502 })) as typeof fetch;
    const warnings: { message: string; detail?: Record<string, unknown> }[] = [];
    const createdAt = Date.now();
    const verifier = createVerifier({
      serviceUrl: ISSUER,
      scopesDocument: { schema: 'SvcScopesYaml', version: 1, platform_id: PLATFORM, scopes: [], routes: [{ method: 'GET', path: '/x', scopes: [] }] },
      fetch: fetchStub,
      revocationFeed: { feedToken: 'acef_test', webSocket: false, staleAfterSeconds: 0.05, openForAtMostSeconds: 300, warn: (message, detail) => warnings.push({ message, detail }) },
    });
    const token = await new SignJWT({ scope: '', svc_token_profile: 'svc-native-jwt' })
      .setProtectedHeader({ alg: 'RS256', kid: 'k1', typ: 'JWT' })
      .setIssuer(ISSUER)
      .setAudience(PLATFORM)
      .setSubject('agent-1')
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(privateKey);
    const authorization = `Bearer ${token}`;
    await verifier.authorize({ method: 'GET', path: '/x', authorization });
    for (let i = 0; i < 500 && !verifier.revocationStats()?.stale; i++) await new Promise((r) => setTimeout(r, 10));
    expect(await verifier.authorize({ method: 'GET', path: '/x', authorization })).toMatchObject({ ok: true });
    verifier.close();

    const warning = warnings.find((w) => w.message.startsWith('revocation feed unreachable'));
    expect(warning?.message).toMatch(/until (\S+Z) \(openForAtMostSeconds: 300 s past staleAfterSeconds\), then refusing them with 503$/);
    // Never synchronised: the bound counts from the verifier's start.
    const refusingFrom = Date.parse(/until (\S+Z)/.exec(warning!.message)![1]!);
    expect(refusingFrom).toBeGreaterThanOrEqual(createdAt + 50 + 300_000);
    expect(refusingFrom).toBeLessThanOrEqual(Date.now() + 50 + 300_000);
  });
});
