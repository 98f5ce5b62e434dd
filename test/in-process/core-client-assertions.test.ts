// The rules of client assertions, in process on memory ports: private_key_jwt (keys added and removed, a
// replay, a removed key's revocation entry, a store that cannot re-read the keys, the agent's status and
// grants carried by the key index, one signature check for an unknown client or kid) and workload identity
// (bound, unbound, unbound after a change). The black-box suites (test/integration/private-key-jwt.test.ts,
// test/integration/workload-identity.test.ts) prove the same through HTTP on Postgres and Redis.
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

async function setUp(options: Parameters<typeof memoryCore>[0] = {}) {
  const core = await memoryCore(options);
  started.push(core);
  const platform = await core.platforms.create({ name: 'shop', scopes: [{ name: 'read' }] }, BY);
  const pair = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', kty: 'EC' as const };
  const agent = await core.clientKeys.createKeyAgent('keyed', { keys: [jwk] }, BY);
  await core.agents.putGrant(agent.id, platform.id, ['read'], BY);
  const sign = (key: CryptoKey, kid: string, o: { jti?: string; iss?: string; sub?: string; aud?: string } = {}) =>
    new SignJWT({ jti: o.jti ?? randomUUID() })
      .setProtectedHeader({ alg: 'ES256', kid })
      .setIssuer(o.iss ?? agent.apiKeyId)
      .setSubject(o.sub ?? agent.apiKeyId)
      .setAudience(o.aud ?? ISSUER)
      .setIssuedAt()
      .setExpirationTime('1m')
      .sign(key);
  const exchange = async (assertion: string, apiKeyId = '') => core.tokens.exchange({ apiKeyId, assertion, platformId: platform.id, profile: 'oauth-at-jwt' }, '192.0.2.7');
  return { core, platform, agent, pair, sign, exchange };
}

const code = (o: ExchangeOutcome) => ('issued' in o ? 'issued' : o.refused instanceof ServiceError ? o.refused.code : o.refused.code);

describe('private_key_jwt (core, memory ports)', () => {
  it('issues for a fresh assertion, refuses its replay and an assertion of a removed key, and revokes the agent', async () => {
    const { core, agent, pair, sign, exchange } = await setUp();
    const jwt = await sign(pair.privateKey, 'k1');
    expect(code(await exchange(jwt))).toBe('issued');
    expect(code(await exchange(jwt))).toBe('invalid_credentials');

    const next = await generateKeyPair('ES256');
    await core.clientKeys.addKey(agent.id, { ...(await exportJWK(next.publicKey)), kid: 'k2' }, BY);
    expect(code(await exchange(await sign(next.privateKey, 'k2')))).toBe('issued');

    const entriesBefore = core.log.entries.length;
    await core.clientKeys.removeKey(agent.id, 'k1', BY);
    expect(core.log.entries.length).toBeGreaterThan(entriesBefore);
    expect(code(await exchange(await sign(pair.privateKey, 'k1')))).toBe('invalid_credentials');
    expect(code(await exchange(await sign(next.privateKey, 'k2')))).toBe('issued');
    expect(core.audit.events.map((e) => e.type)).toEqual(expect.arrayContaining(['agent.key_added', 'agent.key_removed']));
  });

  it("spends the address's failure budget on bad assertions only: past it, even a good one is refused", async () => {
    const { core, pair, sign, exchange } = await setUp({ authFailPoints: 3 });
    for (let i = 0; i < 5; i++) expect(code(await exchange(await sign(pair.privateKey, 'k1')))).toBe('issued');
    const stranger = await generateKeyPair('ES256');
    for (let i = 0; i < 3; i++) expect(code(await exchange(await sign(stranger.privateKey, 'k1')))).toMatch(/invalid_credentials|rate_limited/);
    expect(code(await exchange(await sign(pair.privateKey, 'k1')))).toBe('rate_limited');
    expect(core.refusals).toContain('auth_fail_per_address');
  });

  it('refuses a client_id other than the assertion iss, and iss != sub', async () => {
    const { pair, sign, exchange } = await setUp();
    expect(code(await exchange(await sign(pair.privateKey, 'k1'), 'agnt_kid_00000000000000000000000000000000'))).toBe('invalid_credentials');
    expect(code(await exchange(await sign(pair.privateKey, 'k1', { sub: 'someone' })))).toBe('invalid_credentials');
  });

  it('checks one signature for an unknown client or an unknown kid, whatever the kid, as for a wrong key (no timing oracle)', async () => {
    const { pair, sign, exchange } = await setUp();
    const [stranger, rsa] = await Promise.all([generateKeyPair('ES256'), generateKeyPair('RS256')]);
    const signatureChecks = vi.spyOn(crypto.subtle, 'verify');
    try {
      const cases = {
        'a wrong key': () => sign(stranger.privateKey, 'k1'),
        'an unknown kid': () => sign(pair.privateKey, 'no-such-kid'),
        'an unknown client, any kid': () => sign(pair.privateKey, 'anything', { iss: 'agnt_kid_00000000000000000000000000000000', sub: 'agnt_kid_00000000000000000000000000000000' }),
        'an unknown client, no kid': () =>
          new SignJWT({ jti: randomUUID() }).setProtectedHeader({ alg: 'RS256' }).setIssuer('nobody').setSubject('nobody').setAudience(ISSUER).setIssuedAt().setExpirationTime('1m').sign(rsa.privateKey),
      };
      for (const [name, assertion] of Object.entries(cases)) {
        const jwt = await assertion();
        signatureChecks.mockClear();
        expect(code(await exchange(jwt)), name).toBe('invalid_credentials');
        expect(signatureChecks, name).toHaveBeenCalledTimes(1);
      }
    } finally {
      signatureChecks.mockRestore();
    }
  });

  it('answers 503, not a stale verdict, while the keys of a changed agent cannot be re-read', async () => {
    const { core, agent, pair, sign, exchange } = await setUp();
    core.memory.down = true;
    await core.bus.publish({ kind: 'agent', apiKeyId: agent.apiKeyId });
    const outcome = await exchange(await sign(pair.privateKey, 'k1'));
    expect('refused' in outcome && outcome.refused.code).toBe('store_unavailable');
    core.memory.down = false;
    await core.bus.publish({ kind: 'agent', apiKeyId: agent.apiKeyId });
    expect(code(await exchange(await sign(pair.privateKey, 'k1')))).toBe('issued');
    // Everything to re-read (a reconnect, a write of unknown outcome): the same, for every agent, until it is read.
    core.memory.down = true;
    await core.bus.publish({ kind: 'all' });
    const whileDown = await exchange(await sign(pair.privateKey, 'k1'));
    expect('refused' in whileDown && whileDown.refused.code).toBe('store_unavailable');
    core.memory.down = false;
    expect(code(await exchange(await sign(pair.privateKey, 'k1')))).toBe('issued');
  });

  it("issues from the key index's copy of the agent (no store read), which a deactivation, a grant taken back or a disabled platform changes at once", async () => {
    const { core, agent, platform, pair, sign, exchange } = await setUp();
    core.memory.down = true;
    expect(code(await exchange(await sign(pair.privateKey, 'k1')))).toBe('issued');
    core.memory.down = false;
    await core.agents.update(agent.id, { status: 'inactive' }, BY);
    expect(code(await exchange(await sign(pair.privateKey, 'k1')))).toBe('agent_inactive');
    await core.agents.update(agent.id, { status: 'active' }, BY);
    expect(code(await exchange(await sign(pair.privateKey, 'k1')))).toBe('issued');
    await core.platforms.update(platform.id, { status: 'disabled' }, BY);
    expect(code(await exchange(await sign(pair.privateKey, 'k1')))).toBe('platform_access_denied');
    await core.platforms.update(platform.id, { status: 'active' }, BY);
    expect(code(await exchange(await sign(pair.privateKey, 'k1')))).toBe('issued');
    await core.agents.deleteGrant(agent.id, platform.id, BY);
    expect(code(await exchange(await sign(pair.privateKey, 'k1')))).toBe('platform_access_denied');
  });

  it('never registers a private key, a symmetric key or a weak curve', async () => {
    const { core, agent } = await setUp();
    const full = await generateKeyPair('ES256', { extractable: true });
    await expect(core.clientKeys.addKey(agent.id, { ...(await exportJWK(full.privateKey)), kid: 'leak' }, BY)).rejects.toMatchObject({ code: 'validation_error' });
    await expect(core.clientKeys.addKey(agent.id, { kty: 'oct', kid: 'hmac', k: 'c2VjcmV0' }, BY)).rejects.toMatchObject({ code: 'validation_error' });
    const p384 = await generateKeyPair('ES384', { extractable: true });
    await expect(core.clientKeys.addKey(agent.id, { ...(await exportJWK(p384.publicKey)), kid: 'p384' }, BY)).rejects.toMatchObject({ code: 'validation_error' });
  });
});

describe('workload identity (core, memory ports)', () => {
  it('issues for a bound subject only, and stops once it is unbound', async () => {
    const { core, platform } = await setUp();
    const issuerKey = await generateKeyPair('ES256');
    const issuer = await core.clientKeys.createIssuer({ issuer: 'https://spire.example', audience: ISSUER, source: { keys: [{ ...(await exportJWK(issuerKey.publicKey)), kid: 'td', kty: 'EC' }] } }, BY);
    const { agent } = await core.agents.create('workload', BY);
    await core.agents.putGrant(agent.id, platform.id, ['read'], BY);
    await core.clientKeys.bind(issuer.id, 'spiffe://example.org/job', agent.id, BY);
    const svid = (sub: string) =>
      new SignJWT({}).setProtectedHeader({ alg: 'ES256', kid: 'td' }).setIssuer('https://spire.example').setSubject(sub).setAudience(ISSUER).setIssuedAt().setExpirationTime('5m').sign(issuerKey.privateKey);
    const exchange = async (assertion: string) => core.tokens.exchange({ apiKeyId: '', assertion, platformId: platform.id, profile: 'oauth-at-jwt' }, '192.0.2.8');
    const token = await svid('spiffe://example.org/job');
    const issued = await exchange(token);
    expect('issued' in issued && JSON.parse(Buffer.from(issued.issued.accessToken.split('.')[1]!, 'base64url').toString()).sub).toBe(agent.id);
    expect(code(await exchange(token))).toBe('issued'); // a workload token is presented until rotated
    expect(code(await exchange(await svid('spiffe://example.org/other')))).toBe('invalid_credentials');
    await core.clientKeys.unbind(issuer.id, 'spiffe://example.org/job', BY);
    expect(code(await exchange(token))).toBe('invalid_credentials');
  });
});
