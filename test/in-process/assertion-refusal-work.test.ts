// Every refusal of a client assertion does the same work as a wrong signature: one signature verification,
// against the keys the client or issuer holds when it is known (a client_id that does not match and an
// unbound subject included), else against a stand-in. Counted on WebCrypto's verify, with the key it used,
// so no path can answer early (timing: test/integration/enumeration-timing.test.ts).
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { ServiceError } from '../../src/core/errors.js';
import type { ExchangeOutcome } from '../../src/core/tokens/token-service.js';
import { BY, ISSUER, memoryCore, type MemoryCore } from '../support/memory/core.js';

const started: MemoryCore[] = [];
afterEach(() => {
  for (const c of started.splice(0)) c.stop();
});

const code = (o: ExchangeOutcome) => ('issued' in o ? 'issued' : o.refused instanceof ServiceError ? o.refused.code : o.refused.code);
const WORKLOAD_ISSUER = 'https://k8s.example';

async function setUp() {
  const core = await memoryCore({ authFailPoints: 1_000_000 });
  started.push(core);
  const platform = await core.platforms.create({ name: 'shop', scopes: [{ name: 'read' }] }, BY);
  const [agentKey, issuerKey, stranger] = await Promise.all([generateKeyPair('ES256'), generateKeyPair('ES256'), generateKeyPair('ES256')]);
  const keyAgent = await core.clientKeys.createKeyAgent('keyed', { keys: [{ ...(await exportJWK(agentKey.publicKey)), kid: 'k1', kty: 'EC' }] }, BY);
  await core.agents.putGrant(keyAgent.id, platform.id, ['read'], BY);
  const other = await core.clientKeys.createKeyAgent('other', { keys: [{ ...(await exportJWK(stranger.publicKey)), kid: 'o1', kty: 'EC' }] }, BY);
  const issuer = await core.clientKeys.createIssuer({ issuer: WORKLOAD_ISSUER, audience: ISSUER, source: { keys: [{ ...(await exportJWK(issuerKey.publicKey)), kid: 'td', kty: 'EC' }] } }, BY);
  // A bound subject whose agent is a key agent too (it has an api_key_id a client_id can mismatch).
  await core.clientKeys.bind(issuer.id, 'system:serviceaccount:shop:bound', keyAgent.id, BY);
  const jwt = (key: CryptoKey, kid: string, iss: string, sub: string, lifetime = '1m') =>
    new SignJWT({ jti: randomUUID() }).setProtectedHeader({ alg: 'ES256', kid }).setIssuer(iss).setSubject(sub).setAudience(ISSUER).setIssuedAt().setExpirationTime(lifetime).sign(key);
  const exchange = (assertion: string, clientId = '') => core.tokens.exchange({ apiKeyId: clientId, assertion, platformId: platform.id, profile: 'oauth-at-jwt' }, '192.0.2.9');
  return { keyAgent, other, agentKey, issuerKey, stranger, jwt, exchange };
}

describe('the work of every assertion refusal', () => {
  it('verifies exactly one signature on every refusal path, with the known client’s or issuer’s own key where there is one', async () => {
    const { keyAgent, other, agentKey, issuerKey, stranger, jwt, exchange } = await setUp();
    const bound = 'system:serviceaccount:shop:bound';
    const cases: Record<string, { assertion: () => Promise<string>; clientId?: string; sameKeyAs?: string }> = {
      'key agent, wrong key': { assertion: () => jwt(stranger.privateKey, 'k1', keyAgent.apiKeyId, keyAgent.apiKeyId) },
      'key agent, client_id of another agent': { assertion: () => jwt(stranger.privateKey, 'k1', keyAgent.apiKeyId, keyAgent.apiKeyId), clientId: other.apiKeyId, sameKeyAs: 'key agent, wrong key' },
      'key agent, its own signature, client_id of another agent': { assertion: () => jwt(agentKey.privateKey, 'k1', keyAgent.apiKeyId, keyAgent.apiKeyId), clientId: other.apiKeyId, sameKeyAs: 'key agent, wrong key' },
      'key agent, unknown kid': { assertion: () => jwt(stranger.privateKey, 'nope', keyAgent.apiKeyId, keyAgent.apiKeyId) },
      'unknown client': { assertion: () => jwt(stranger.privateKey, 'k1', 'agnt_kid_00000000000000000000000000000000', 'agnt_kid_00000000000000000000000000000000') },
      'bound subject, forged': { assertion: () => jwt(stranger.privateKey, 'td', WORKLOAD_ISSUER, bound) },
      'unbound subject, forged': { assertion: () => jwt(stranger.privateKey, 'td', WORKLOAD_ISSUER, 'system:serviceaccount:shop:nobody'), sameKeyAs: 'bound subject, forged' },
      'unbound subject, signed by the issuer': { assertion: () => jwt(issuerKey.privateKey, 'td', WORKLOAD_ISSUER, 'system:serviceaccount:shop:nobody'), sameKeyAs: 'bound subject, forged' },
      'bound subject, client_id of another agent': { assertion: () => jwt(issuerKey.privateKey, 'td', WORKLOAD_ISSUER, bound), clientId: other.apiKeyId, sameKeyAs: 'bound subject, forged' },
      'unknown issuer': { assertion: () => jwt(issuerKey.privateKey, 'td', 'https://elsewhere.example', bound) },
    };
    // Both good paths issue (the keys and bindings above are right).
    expect(code(await exchange(await jwt(agentKey.privateKey, 'k1', keyAgent.apiKeyId, keyAgent.apiKeyId)))).toBe('issued');
    expect(code(await exchange(await jwt(issuerKey.privateKey, 'td', WORKLOAD_ISSUER, bound)))).toBe('issued');

    const signatureChecks = vi.spyOn(crypto.subtle, 'verify');
    const keyUsed: Record<string, unknown> = {};
    try {
      for (const [name, { assertion, clientId }] of Object.entries(cases)) {
        const presented = await assertion();
        signatureChecks.mockClear();
        expect(code(await exchange(presented, clientId)), name).toBe('invalid_credentials');
        expect(signatureChecks, name).toHaveBeenCalledTimes(1);
        keyUsed[name] = signatureChecks.mock.calls[0]![1];
      }
    } finally {
      signatureChecks.mockRestore();
    }
    for (const [name, { sameKeyAs }] of Object.entries(cases)) if (sameKeyAs) expect(keyUsed[name], `${name}: the key of "${sameKeyAs}"`).toBe(keyUsed[sameKeyAs]);
    expect(keyUsed['unknown client']).not.toBe(keyUsed['key agent, wrong key']);
  });
});
