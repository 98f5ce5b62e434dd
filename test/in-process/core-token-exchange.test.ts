// The rules of token exchange, in process on memory ports (test/support/memory): the refusal order, scopes,
// limits, the secret's grace, the key that signs, and what is recorded. The black-box suites prove the same
// through HTTP against Postgres and Redis; these run in milliseconds and name the rule that broke.
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HTTP_METHODS } from '../../packages/protocol/src/scopes-file.js';
import { CredentialRefusal, ServiceError, StoreUnavailableError } from '../../src/core/errors.js';
import { ROUTE_METHODS } from '../../src/core/platforms/platform-service.js';
import type { ExchangeOutcome, TokenRequest } from '../../src/core/tokens/token-service.js';
import { BY, ISSUER, memoryCore, TOKEN_TTL_SECONDS, type CoreOptions, type MemoryCore } from '../support/memory/core.js';

let core: MemoryCore;
const started: MemoryCore[] = [];

async function start(options: CoreOptions = {}): Promise<MemoryCore> {
  const c = await memoryCore(options);
  started.push(c);
  return c;
}

afterEach(() => {
  for (const c of started.splice(0)) c.stop();
});

/** A platform with two scopes and an agent granted `scopes` on it. */
async function agentOnPlatform(c: MemoryCore, scopes = ['orders:read', 'orders:write']) {
  const platform = await c.platforms.create({
    name: 'shop',
    scopes: [{ name: 'orders:read' }, { name: 'orders:write' }, { name: 'admin' }],
    routes: [{ method: 'get', path: '/orders', scopes: ['orders:read'] }],
  }, BY);
  const { agent, secret } = await c.agents.create('agent', BY);
  if (scopes.length > 0) await c.agents.putGrant(agent.id, platform.id, scopes, BY);
  const request = (over: Partial<TokenRequest> = {}): TokenRequest => ({ apiKeyId: agent.apiKeyId, secret, platformId: platform.id, ...over });
  return { platform, agent, secret, request };
}

function refusedCode(outcome: ExchangeOutcome): string {
  if ('issued' in outcome) throw new Error('expected a refusal, got a token');
  return outcome.refused instanceof ServiceError ? outcome.refused.code : outcome.refused.code;
}

function claims(outcome: ExchangeOutcome): Record<string, unknown> {
  if (!('issued' in outcome)) throw new Error(`expected a token, got ${refusedCode(outcome)}`);
  return JSON.parse(Buffer.from(outcome.issued.accessToken.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
}

const exchange = (c: MemoryCore, request: TokenRequest, address = '192.0.2.1') => c.tokens.exchange(request, address);

describe('token exchange (core, memory ports)', () => {
  beforeEach(async () => {
    core = await start();
  });

  it('issues a token bound to the platform, with every claim of the contract, and records it first', async () => {
    const { agent, platform, request } = await agentOnPlatform(core);
    const before = Math.floor(Date.now() / 1000);
    const outcome = await exchange(core, request({ platformId: platform.id.toUpperCase() }));
    const c = claims(outcome);
    expect(c).toMatchObject({ iss: ISSUER, sub: agent.id, aud: platform.id, scope: 'orders:read orders:write', svc_token_profile: 'svc-native-jwt', client_id: agent.apiKeyId });
    expect(c.iat).toBeGreaterThanOrEqual(before);
    expect(c.nbf).toBe(c.iat);
    expect(c.exp).toBe((c.iat as number) + TOKEN_TTL_SECONDS);
    expect(c.jti).toMatch(/^[0-9a-f-]{36}$/);
    expect('issued' in outcome && outcome.issued.expiresIn).toBe(TOKEN_TTL_SECONDS);
    const issued = core.audit.events.filter((e) => e.type === 'token.issued');
    expect(issued).toHaveLength(1);
    expect(issued[0]).toMatchObject({ jti: c.jti, agentId: agent.id, platformId: platform.id, kid: core.keys.activeKey().kid });
  });

  it('signs oauth-at-jwt tokens with typ at+jwt and the same claims; the default stays typ JWT', async () => {
    const { request } = await agentOnPlatform(core);
    const oauth = claims(await exchange(core, request({ profile: 'oauth-at-jwt' })));
    const native = claims(await exchange(core, request()));
    expect(core.signer.signed.map((s) => s.typ)).toEqual(['at+jwt', 'JWT']);
    expect(oauth.svc_token_profile).toBe('oauth-at-jwt');
    expect(native.svc_token_profile).toBe('svc-native-jwt');
    expect(Object.keys(oauth).sort()).toEqual(Object.keys(native).sort());
  });

  it('refuses an unsupported profile before any credential work, even with a wrong secret', async () => {
    const { request } = await agentOnPlatform(core);
    const verifications = core.hasher.verifications;
    expect(refusedCode(await exchange(core, request({ profile: 'oauth-at-jwt-v9', secret: 'wrong' })))).toBe('unsupported_profile');
    expect(core.hasher.verifications).toBe(verifications);
  });

  it('a wrong secret and an unknown key are refused alike, each at the cost of one verification; only the first names the agent', async () => {
    const { agent, request } = await agentOnPlatform(core);
    const v0 = core.hasher.verifications;
    const wrong = await exchange(core, request({ secret: 'not-the-secret' }));
    const unknown = await exchange(core, request({ apiKeyId: `agnt_kid_${'0'.repeat(32)}` }));
    expect(refusedCode(wrong)).toBe('invalid_credentials');
    expect(refusedCode(unknown)).toBe('invalid_credentials');
    expect(core.hasher.verifications - v0).toBe(2);
    expect('refused' in wrong && wrong.refused).toBeInstanceOf(CredentialRefusal);
    expect('refused' in wrong && wrong.checked && 'refused' in unknown && unknown.checked).toBe(true);
    // The core records both refusals; only the first names the agent (never in the answer).
    const refused = core.audit.events.filter((e) => e.type === 'token.refused');
    expect(refused.map((e) => [e.agentId, e.data?.api_key_id, e.data?.auth_method])).toEqual([
      [agent.id, agent.apiKeyId, 'client_secret'],
      [null, `agnt_kid_${'0'.repeat(32)}`, 'client_secret'],
    ]);
  });

  it('records the refusals of a credential check (with the verified method after it), not those before one nor those of a client that hung up', async () => {
    const { agent, platform, request } = await agentOnPlatform(core, ['orders:read']);
    const refusedEvents = () => core.audit.events.filter((e) => e.type === 'token.refused');
    // Before any credential check: a bad profile. Not recorded; the caller counts it.
    const early = await exchange(core, request({ profile: 'nope', secret: 'wrong' }));
    expect('refused' in early && early.checked).toBe(false);
    // A client that hung up: checked, but nobody waits for the answer, so not recorded either.
    const gone = new AbortController();
    gone.abort();
    const abandoned = await core.tokens.exchange(request({ secret: 'wrong' }), '192.0.2.1', gone.signal);
    expect('refused' in abandoned && abandoned.checked).toBe(true);
    expect(refusedEvents()).toEqual([]);
    // After the check: a scope the grant does not hold, with the verified method and the platform.
    const late = await exchange(core, request({ platformId: platform.id.toUpperCase(), scopes: ['orders:write'] }));
    expect('refused' in late && late.checked).toBe(true);
    expect(refusedEvents().map((e) => [e.agentId, e.platformId, e.data])).toEqual([
      [agent.id, platform.id, { error_code: 'invalid_scope', auth_method: 'client_secret', api_key_id: agent.apiKeyId }],
    ]);
  });

  it('checks in the contract order: authenticate, key rate limit, agent status, platform access, scopes', async () => {
    const c = await start({ tokenPoints: 2 });
    const { agent, request } = await agentOnPlatform(c, ['orders:read']);
    const other = await c.platforms.create({ name: 'other', scopes: [{ name: 'x' }] }, BY);
    await c.agents.update(agent.id, { status: 'inactive' }, BY);
    // Inactive and asking for a platform it has no grant on: agent status comes first.
    expect(refusedCode(await exchange(c, request({ platformId: other.id, scopes: ['nope'] })))).toBe('agent_inactive');
    expect(refusedCode(await exchange(c, request()))).toBe('agent_inactive');
    // The key's limit (2) is spent by authenticated requests, refused or not, and comes before the status.
    expect(refusedCode(await exchange(c, request()))).toBe('rate_limited');
    // A wrong secret is not authenticated: refused as such, whatever the key's limit.
    expect(refusedCode(await exchange(c, request({ secret: 'wrong' })))).toBe('invalid_credentials');
    expect(c.refusals).toEqual(['token_per_key']);
  });

  it('platform access: no grant, or a platform that is not active, is platform_access_denied before scopes', async () => {
    const { agent, platform, request } = await agentOnPlatform(core, ['orders:read']);
    const other = await core.platforms.create({ name: 'other', scopes: [{ name: 'x' }] }, BY);
    expect(refusedCode(await exchange(core, request({ platformId: other.id, scopes: ['x'] })))).toBe('platform_access_denied');
    await core.platforms.update(platform.id, { status: 'suspended' }, BY);
    expect(refusedCode(await exchange(core, request({ scopes: ['admin'] })))).toBe('platform_access_denied');
    await core.platforms.update(platform.id, { status: 'active' }, BY);
    expect(claims(await exchange(core, request())).sub).toBe(agent.id);
  });

  it('scopes: none asked gives every granted scope; each asked scope must be granted; sorted without duplicates', async () => {
    const { request } = await agentOnPlatform(core, ['orders:write', 'orders:read']);
    expect(claims(await exchange(core, request())).scope).toBe('orders:read orders:write');
    expect(claims(await exchange(core, request({ scopes: [] }))).scope).toBe('orders:read orders:write');
    expect(claims(await exchange(core, request({ scopes: ['orders:write', 'orders:read', 'orders:write'] }))).scope).toBe('orders:read orders:write');
    expect(claims(await exchange(core, request({ scopes: ['orders:read'] }))).scope).toBe('orders:read');
    expect(refusedCode(await exchange(core, request({ scopes: ['orders:read', 'admin'] })))).toBe('invalid_scope');
  });

  it('a grant that holds no scope gets invalid_scope, not a token without scope', async () => {
    const { agent, platform, request } = await agentOnPlatform(core, ['orders:read']);
    await core.platforms.update(platform.id, { scopes: [{ name: 'admin' }], routes: [] }, BY); // drops orders:read from the grant
    expect((await core.agents.listGrants(agent.id))[0]?.scopes).toEqual([]);
    expect(refusedCode(await exchange(core, request()))).toBe('invalid_scope');
  });

  it('a warm agent costs no verification; any change to the agent makes the next request verify again', async () => {
    const { agent, request } = await agentOnPlatform(core);
    claims(await exchange(core, request()));
    const v = core.hasher.verifications;
    claims(await exchange(core, request()));
    claims(await exchange(core, request()));
    expect(core.hasher.verifications).toBe(v);
    expect(core.telemetry.filter((e) => e.type === 'verified_memory' && e.hit)).toHaveLength(2);
    await core.agents.update(agent.id, { name: 'renamed' }, BY);
    claims(await exchange(core, request()));
    expect(core.hasher.verifications).toBe(v + 1);
  });

  it('a deactivated warm agent is refused at once, and its tokens are revoked on the platforms it holds a grant on', async () => {
    const { agent, platform, request } = await agentOnPlatform(core);
    claims(await exchange(core, request()));
    await core.agents.update(agent.id, { status: 'inactive' }, BY);
    expect(refusedCode(await exchange(core, request()))).toBe('agent_inactive');
    expect(core.log.entries.map((e) => [e.kind, e.platformId, e.agentId])).toEqual([['agent', platform.id, agent.id]]);
  });

  it('failed secrets spend the address budget before argon2; other addresses and successes are unaffected', async () => {
    const c = await start({ authFailPoints: 2 });
    const { request } = await agentOnPlatform(c);
    claims(await exchange(c, request(), '192.0.2.7'));
    claims(await exchange(c, request(), '192.0.2.7')); // successes give their point back
    expect(refusedCode(await exchange(c, request({ secret: 'a' }), '192.0.2.7'))).toBe('invalid_credentials');
    expect(refusedCode(await exchange(c, request({ secret: 'b' }), '192.0.2.7'))).toBe('invalid_credentials');
    const v = c.hasher.verifications;
    expect(refusedCode(await exchange(c, request({ secret: 'c' }), '192.0.2.7'))).toBe('rate_limited');
    expect(c.hasher.verifications).toBe(v); // refused before any argon2 work
    expect(claims(await exchange(c, request(), '192.0.2.8')).scope).toBe('orders:read orders:write');
  });

  it('a full verification line refuses a cold check with 503 before any store read or limiter point', async () => {
    const { request } = await agentOnPlatform(core);
    core.hasher.full = new ServiceError('service_unavailable', 'busy', 3);
    const outcome = await exchange(core, request());
    expect(refusedCode(outcome)).toBe('service_unavailable');
    expect(core.hasher.verifications).toBe(0 + 0); // the decoy was hashed at init, nothing verified
  });

  it('one address holds at most its share of the argon2 line', async () => {
    const c = await start({ argon2MaxPerAddress: 1 });
    const { request } = await agentOnPlatform(c);
    const [first, second] = await Promise.all([exchange(c, request({ secret: 'x' }), '192.0.2.9'), exchange(c, request({ secret: 'y' }), '192.0.2.9')]);
    expect([refusedCode(first), refusedCode(second)].sort()).toEqual(['invalid_credentials', 'rate_limited']);
    expect(c.telemetry).toContainEqual({ type: 'rate_limited', limiter: 'argon2_share_per_address' });
  });

  it('secret rotation with grace: both secrets work until the grace ends; neither revokes tokens', async () => {
    const { agent, request } = await agentOnPlatform(core);
    const rotated = await core.agents.rotateSecret(agent.id, 60, BY);
    expect(claims(await exchange(core, request())).sub).toBe(agent.id);
    expect(claims(await exchange(core, request({ secret: rotated.secret }))).sub).toBe(agent.id);
    expect(core.log.entries).toEqual([]);
    // The grace ends: the old secret is refused, even though it was verified (remembered) before.
    core.memory.agents.get(agent.id)!.previousExpiresAt = new Date(Date.now() - 1);
    await core.bus.publish({ kind: 'agent', apiKeyId: agent.apiKeyId });
    expect(refusedCode(await exchange(core, request()))).toBe('invalid_credentials');
    expect(claims(await exchange(core, request({ secret: rotated.secret }))).sub).toBe(agent.id);
  });

  it('secret rotation without grace: the old secret is refused at once and its tokens are revoked', async () => {
    const { agent, platform, request } = await agentOnPlatform(core);
    claims(await exchange(core, request()));
    const rotated = await core.agents.rotateSecret(agent.id, 0, BY);
    expect(rotated.apiKeyId).toBe(agent.apiKeyId);
    expect(refusedCode(await exchange(core, request()))).toBe('invalid_credentials');
    expect(claims(await exchange(core, request({ secret: rotated.secret }))).sub).toBe(agent.id);
    expect(core.log.entries.map((e) => [e.kind, e.platformId])).toEqual([['agent', platform.id]]);
  });

  it('signs with the active key; a rotated key signs only once its propagation window has passed', async () => {
    const { request } = await agentOnPlatform(core);
    const active = core.keys.activeKey().kid;
    await exchange(core, request());
    const next = await core.keys.rotate(BY);
    expect(next.state).toBe('next');
    await exchange(core, request());
    expect(core.signer.signed.map((s) => s.kid)).toEqual([active, active]);
    // The window passes (the row's activation moves to the past): the new key signs, the old one retires later.
    core.memory.keys.get(active)!.activatesAt = new Date(Date.now() - 600_000);
    core.memory.keys.get(next.row.kid)!.activatesAt = new Date(Date.now() - 1000);
    await core.keys.refresh();
    await exchange(core, request());
    expect(core.signer.signed.at(-1)!.kid).toBe(next.row.kid);
    expect(core.keys.statuses().find((s) => s.row.kid === active)?.state).toBe('retiring');
  });

  it('the active key cannot be retired; retiring another voids its tokens on every platform', async () => {
    const { platform } = await agentOnPlatform(core);
    const second = await core.platforms.create({ name: 'second', scopes: [{ name: 'x' }] }, BY);
    await expect(core.keys.retire(core.keys.activeKey().kid, BY)).rejects.toMatchObject({ code: 'conflict' });
    const next = await core.keys.rotate(BY);
    await core.keys.retire(next.row.kid, BY);
    expect(core.log.entries.filter((e) => e.kind === 'key').map((e) => e.platformId).sort()).toEqual([platform.id, second.id].sort());
    await expect(core.keys.retire('no-such-kid', BY)).rejects.toMatchObject({ code: 'not_found' });
  });

  it('no token leaves when the audit trail cannot make its event durable (503), and nothing when the store is down', async () => {
    const { request } = await agentOnPlatform(core);
    core.audit.failRecords = true;
    const outcome = await exchange(core, request());
    expect(refusedCode(outcome)).toBe('service_unavailable');
    core.audit.failRecords = false;
    core.memory.down = true;
    const down = await exchange(core, request({ secret: 'cold-path' }));
    expect('refused' in down && down.refused).toBeInstanceOf(StoreUnavailableError);
  });
});

describe('revoking changes (core, memory ports)', () => {
  beforeEach(async () => {
    core = await start();
  });

  it('narrowing or removing a grant revokes; widening does not', async () => {
    const { agent, platform } = await agentOnPlatform(core, ['orders:read']);
    await core.agents.putGrant(agent.id, platform.id, ['orders:read', 'orders:write'], BY);
    expect(core.log.entries).toEqual([]);
    await core.agents.putGrant(agent.id, platform.id, ['orders:write'], BY);
    await core.agents.deleteGrant(agent.id, platform.id, BY);
    expect(core.log.entries.map((e) => [e.kind, e.agentId])).toEqual([
      ['agent', agent.id],
      ['agent', agent.id],
    ]);
  });

  it('suspending a platform revokes every token for it; dropping a scope revokes only the agents holding it', async () => {
    const { agent, platform } = await agentOnPlatform(core, ['orders:write']);
    const reader = (await core.agents.create('reader', BY)).agent;
    await core.agents.putGrant(reader.id, platform.id, ['orders:read'], BY);
    await core.platforms.update(platform.id, { scopes: [{ name: 'orders:read' }, { name: 'admin' }] }, BY);
    expect(core.log.entries.map((e) => [e.kind, e.agentId])).toEqual([['agent', agent.id]]);
    await core.platforms.update(platform.id, { status: 'disabled' }, BY);
    expect(core.log.entries.at(-1)).toMatchObject({ kind: 'platform', platformId: platform.id, agentId: null });
  });

  it('route rules name only defined scopes and known methods (the scope file set)', async () => {
    expect([...ROUTE_METHODS]).toEqual([...HTTP_METHODS]);
    await expect(core.platforms.create({ name: 'p', scopes: [{ name: 'a' }], routes: [{ method: 'BREW', path: '/', scopes: ['a'] }] }, BY)).rejects.toMatchObject({ code: 'validation_error' });
    await expect(core.platforms.create({ name: 'p', scopes: [{ name: 'a' }], routes: [{ method: 'GET', path: '/', scopes: ['b'] }] }, BY)).rejects.toMatchObject({ code: 'validation_error' });
    await expect(core.platforms.create({ name: 'p', scopes: [{ name: 'a' }, { name: 'a' }] }, BY)).rejects.toMatchObject({ code: 'validation_error' });
    const ok = await core.platforms.create({ name: 'p', scopes: [{ name: 'a' }], routes: [{ method: 'get', path: '/x', scopes: ['a'] }] }, BY);
    expect(ok.routes).toEqual([{ method: 'GET', path: '/x', scopes: ['a'] }]);
    await expect(core.platforms.get(randomUUID())).rejects.toMatchObject({ code: 'not_found' });
  });
});
