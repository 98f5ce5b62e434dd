// How a token was obtained, in the audit trail (docs/audit.md), as one suite run in process
// (test/in-process/token-audit.test.ts: the memory ports) and against a service process on real Postgres +
// Redis (test/integration/token-audit.test.ts, which also reads the table itself). Through the admin API's
// GET /admin/v1/events: token.issued says the method (client_secret, private_key_jwt, workload), the client
// key's kid and the assertion's jti, the workload's issuer and subject; token.refused says what the client
// claimed, where it is known when it is refused; claimed values come out bounded, with every control,
// bidirectional or invisible character (and a lone surrogate) replaced by U+FFFD; no secret and no assertion
// (nor any of its three parts) is in the trail.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { postJson, type AdminClient, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { waitFor } from '../../kit/wait.js';

export const TOKEN_AUDIT_ISSUER = 'https://ace.test.example';
/** What the target must be started with: the tokens' issuer (the assertions' aud), room for the refusals. */
export const TOKEN_AUDIT_ENV = { ISSUER: TOKEN_AUDIT_ISSUER, RATE_LIMIT_AUTH_FAIL_POINTS: '1000', AUDIT_REFUSALS_PER_WINDOW: '1000' };
const WORKLOAD_ISSUER = 'https://spire.example.org';
const WORKLOAD_SUBJECT = 'spiffe://example.org/ns/analytics/sa/reports';

export interface TokenAuditTarget {
  publicUrl: string;
  fetch: typeof fetch;
  admin: AdminClient;
  dispose(): Promise<void>;
}

export type AuditedEvent = Record<string, any> & { id: string; type: string };

/** What a suite leaves for the target's own checks (the integration suite reads the table too). */
export interface TokenAuditContext {
  target: () => TokenAuditTarget;
  /** Every secret and every assertion (whole) the suite sent. */
  sent: () => { secrets: string[]; assertions: string[] };
}

// A hostile claimed value: a right-to-left override, an escape sequence, a bell, zero-width and line
// separator characters, a lone surrogate, then far more text than anyone needs.
const HOSTILE = '\u202Eevil\u001b[31m\u0007\u200B\u2028\uD800';
const hostile = (tag: string, length: number) => `${tag}${HOSTILE}${'x'.repeat(length)}`;
// Characters that must never reach the trail from a client.
const UNSAFE = /[\u0000-\u001F\u007F-\u009F\u061C\u200B-\u200F\u2028-\u202E\u2060-\u2069\uFEFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

type Alg = 'ES256' | 'EdDSA';

async function keyPair(alg: Alg, kid: string): Promise<{ privateKey: CryptoKey; jwk: JWK; kid: string; alg: Alg }> {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true, ...(alg === 'EdDSA' ? { crv: 'Ed25519' } : {}) });
  return { privateKey, kid, alg, jwk: { ...(await exportJWK(publicKey)), kid, alg } };
}

interface Claims {
  iss: string;
  sub: string;
  jti?: string;
  aud?: string;
}

function sign(key: { privateKey: CryptoKey; alg: Alg }, kid: string, claims: Claims): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT(claims.jti === undefined ? {} : { jti: claims.jti })
    .setProtectedHeader({ alg: key.alg, kid })
    .setIssuer(claims.iss)
    .setSubject(claims.sub)
    .setAudience(claims.aud ?? TOKEN_AUDIT_ISSUER)
    .setIssuedAt(now)
    .setExpirationTime(now + 60)
    .sign(key.privateKey);
}

export function describeTokenAudit(name: string, start: () => Promise<TokenAuditTarget>, extra?: (context: TokenAuditContext) => void): void {
  describe(`token events say how the token was obtained (${name})`, () => {
    let target: TokenAuditTarget;
    let shop: PlatformRecord;
    let secretAgent: AgentCredentials;
    let keyAgent: { agent_id: string; api_key_id: string };
    let reports: AgentCredentials;
    let issuerId = '';
    let clientKey: Awaited<ReturnType<typeof keyPair>>;
    let workloadKey: Awaited<ReturnType<typeof keyPair>>;
    const secrets: string[] = [];
    const assertions: string[] = [];

    const oauth = async (form: Record<string, string>, headers: Record<string, string> = {}) => {
      const response = await target.fetch(`${target.publicUrl}/oauth2/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams(form).toString(),
      });
      return { status: response.status, body: (await response.json()) as Record<string, any> };
    };
    const withAssertion = (jwt: string, extraForm: Record<string, string> = {}) => {
      assertions.push(jwt);
      return oauth({
        grant_type: 'client_credentials',
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
        client_assertion: jwt,
        audience: shop.platform_id,
        ...extraForm,
      });
    };
    const tokenJti = (accessToken: string) => JSON.parse(Buffer.from(accessToken.split('.')[1]!, 'base64url').toString()).jti as string;

    /** The token events, once `ready` holds of them (refusals are written in the next batch, after their answer). */
    async function tokenEvents(what: string, ready: (events: AuditedEvent[]) => boolean): Promise<AuditedEvent[]> {
      let events: AuditedEvent[] = [];
      await waitFor(what, async () => {
        const page = await target.admin.call<{ events: AuditedEvent[] }>('GET', '/admin/v1/events?type=token.issued,token.refused&limit=1000');
        events = page.events;
        return ready(events);
      });
      return events;
    }

    beforeAll(async () => {
      target = await start();
      const { admin } = target;
      shop = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'read' }, { name: 'write' }] });
      secretAgent = await admin.createAgent('with-a-secret');
      secrets.push(secretAgent.secret);
      await admin.grant(secretAgent.agent_id, shop.platform_id, ['read']);
      clientKey = await keyPair('ES256', `client-key-${randomBytes(3).toString('hex')}`);
      keyAgent = await admin.call('POST', '/admin/v1/agents', { name: 'with-a-key', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [clientKey.jwk] } }, 201);
      await admin.grant(keyAgent.agent_id, shop.platform_id, ['read']);
      workloadKey = await keyPair('EdDSA', `spire-${randomBytes(3).toString('hex')}`);
      issuerId = (await admin.call('POST', '/admin/v1/workload-issuers', { issuer: WORKLOAD_ISSUER, audience: TOKEN_AUDIT_ISSUER, jwks: { keys: [workloadKey.jwk] } }, 201)).issuer_id;
      reports = await admin.createAgent('reports');
      secrets.push(reports.secret);
      await admin.grant(reports.agent_id, shop.platform_id, ['read']);
      await admin.call('POST', `/admin/v1/workload-issuers/${issuerId}/bindings`, { subject: WORKLOAD_SUBJECT, agent_id: reports.agent_id }, 201);
    });

    afterAll(async () => {
      await target?.dispose();
    });

    it('client_secret: token.issued names the method, by either door; a wrong secret’s token.refused the api_key_id presented', async () => {
      const issued = await postJson(`${target.publicUrl}/api/v1/auth/token`, { api_key_id: secretAgent.api_key_id, secret: secretAgent.secret, platform_id: shop.platform_id }, {}, target.fetch);
      expect(issued.status).toBe(200);
      const basic = Buffer.from(`${encodeURIComponent(secretAgent.api_key_id)}:${encodeURIComponent(secretAgent.secret)}`).toString('base64');
      const viaOAuth = await oauth({ grant_type: 'client_credentials', audience: shop.platform_id }, { authorization: `Basic ${basic}` });
      expect(viaOAuth.status).toBe(200);
      const wrong = 'not-the-secret-0123456789';
      secrets.push(wrong);
      expect((await postJson(`${target.publicUrl}/api/v1/auth/token`, { api_key_id: secretAgent.api_key_id, secret: wrong, platform_id: shop.platform_id }, {}, target.fetch)).status).toBe(401);

      const jtis = [tokenJti(issued.body.access_token), tokenJti(viaOAuth.body.access_token)];
      const events = await tokenEvents('the secret agent’s token events', (all) => all.filter((e) => e.agent_id === secretAgent.agent_id).length >= 3);
      const mine = events.filter((e) => e.agent_id === secretAgent.agent_id);
      for (const jti of jtis) {
        const issuedEvent = mine.find((e) => e.jti === jti);
        expect(issuedEvent).toMatchObject({ type: 'token.issued', auth_method: 'client_secret', platform_id: shop.platform_id });
        // The agent's own api_key_id: agent_id says it.
        expect(issuedEvent).not.toHaveProperty('api_key_id');
      }
      const refused = mine.find((e) => e.type === 'token.refused');
      expect(refused).toMatchObject({ error_code: 'invalid_credentials', auth_method: 'client_secret', api_key_id: secretAgent.api_key_id, platform_id: shop.platform_id });
      expect(refused).not.toHaveProperty('client_kid');
      expect(refused).not.toHaveProperty('assertion_jti');
    });

    it('private_key_jwt: token.issued names the client key’s kid and the assertion’s jti; its replay and a refusal after the check do too', async () => {
      const jti = randomUUID();
      const jwt = await sign(clientKey, clientKey.kid, { iss: keyAgent.api_key_id, sub: keyAgent.api_key_id, jti });
      const issued = await withAssertion(jwt);
      expect(issued.status).toBe(200);
      // The same assertion again: refused (single use), named by its client, key and jti.
      expect((await withAssertion(jwt)).status).toBe(401);
      // A scope the grant does not hold: refused after the check, with what the check verified.
      const otherJti = randomUUID();
      expect((await withAssertion(await sign(clientKey, clientKey.kid, { iss: keyAgent.api_key_id, sub: keyAgent.api_key_id, jti: otherJti }), { scope: 'write' })).status).toBe(400);

      const events = await tokenEvents('the key agent’s token events', (all) => all.filter((e) => e.agent_id === keyAgent.agent_id).length >= 3);
      const mine = events.filter((e) => e.agent_id === keyAgent.agent_id);
      const expected = { auth_method: 'private_key_jwt', api_key_id: keyAgent.api_key_id, client_kid: clientKey.kid };
      const { api_key_id: _agentsOwn, ...verified } = expected;
      expect(mine.find((e) => e.type === 'token.issued')).toMatchObject({ ...verified, assertion_jti: jti, jti: tokenJti(issued.body.access_token) });
      expect(mine.find((e) => e.type === 'token.refused' && e.error_code === 'invalid_credentials')).toMatchObject({ ...expected, assertion_jti: jti });
      expect(mine.find((e) => e.type === 'token.refused' && e.error_code === 'invalid_scope')).toMatchObject({ ...expected, assertion_jti: otherJti, platform_id: shop.platform_id });
    });

    it('workload: token.issued names the issuer, its id and the subject; an assertion for the bound subject refused names them too', async () => {
      const jti = randomUUID();
      const issued = await withAssertion(await sign(workloadKey, workloadKey.kid, { iss: WORKLOAD_ISSUER, sub: WORKLOAD_SUBJECT, jti }));
      expect(issued.status).toBe(200);
      // Addressed to someone else: refused, naming the bound agent.
      const refusedJti = randomUUID();
      expect((await withAssertion(await sign(workloadKey, workloadKey.kid, { iss: WORKLOAD_ISSUER, sub: WORKLOAD_SUBJECT, jti: refusedJti, aud: 'https://elsewhere.example' }))).status).toBe(401);

      const events = await tokenEvents('the workload’s token events', (all) => all.filter((e) => e.agent_id === reports.agent_id).length >= 2);
      const mine = events.filter((e) => e.agent_id === reports.agent_id);
      const expected = { auth_method: 'workload', issuer: WORKLOAD_ISSUER, issuer_id: issuerId, subject: WORKLOAD_SUBJECT };
      expect(mine.find((e) => e.type === 'token.issued')).toMatchObject({ ...expected, assertion_jti: jti, jti: tokenJti(issued.body.access_token) });
      expect(mine.find((e) => e.type === 'token.refused')).toMatchObject({ ...expected, assertion_jti: refusedJti, error_code: 'invalid_credentials' });
    });

    it('hostile claimed values come out bounded and cleaned, and no secret or assertion text is in the trail', async () => {
      const stranger = await keyPair('ES256', 'unused');
      // An unknown client (iss = sub): its claimed client id, kid and jti.
      const client = hostile('client-', 1200);
      const kid = hostile('kid-', 900);
      const jti = hostile('jti-', 900);
      expect((await withAssertion(await sign(stranger, kid, { iss: client, sub: client, jti }))).status).toBe(401);
      // A trusted issuer, a subject nobody bound: the claimed subject beside the issuer (over the 512 kept,
      // under the 1,024 looked up: a longer one names nobody, the issuer's id then unknown).
      const subject = hostile('spiffe://example.org/', 700);
      const workloadJti = hostile('wjti-', 900);
      expect((await withAssertion(await sign(workloadKey, workloadKey.kid, { iss: WORKLOAD_ISSUER, sub: subject, jti: workloadJti }))).status).toBe(401);
      // An untrusted issuer that looks like a trusted one.
      const lookalike = `${WORKLOAD_ISSUER}\u200B`;
      expect((await withAssertion(await sign(stranger, 'k', { iss: lookalike, sub: WORKLOAD_SUBJECT }))).status).toBe(401);

      const byPrefix = (all: AuditedEvent[], field: string, prefix: string) => all.find((e) => e.type === 'token.refused' && typeof e[field] === 'string' && e[field].startsWith(prefix));
      const events = await tokenEvents('the hostile refusals', (all) => byPrefix(all, 'api_key_id', 'client-') !== undefined && byPrefix(all, 'subject', 'spiffe://example.org/\uFFFD') !== undefined && byPrefix(all, 'issuer', `${WORKLOAD_ISSUER}\uFFFD`) !== undefined);
      const unknownClient = byPrefix(events, 'api_key_id', 'client-')!;
      // What each claimed value becomes: every unsafe character one U+FFFD, cut to its bound with "…".
      const cleaned = (value: string, max: number) => `${value.slice(0, max - 1).replace(new RegExp(UNSAFE.source, 'g'), '\uFFFD')}…`;
      expect(unknownClient).toMatchObject({
        error_code: 'invalid_credentials',
        auth_method: 'private_key_jwt',
        api_key_id: cleaned(client, 128),
        client_kid: cleaned(kid, 128),
        assertion_jti: cleaned(jti, 256),
      });
      expect(unknownClient.api_key_id).toBe(`client-\uFFFDevil\uFFFD[31m\uFFFD\uFFFD\uFFFD\uFFFD${'x'.repeat(127 - 21)}…`);
      expect(unknownClient).not.toHaveProperty('agent_id');
      const unbound = byPrefix(events, 'subject', 'spiffe://example.org/\uFFFD')!;
      expect(unbound).toMatchObject({ auth_method: 'workload', issuer: WORKLOAD_ISSUER, issuer_id: issuerId, subject: cleaned(subject, 512), assertion_jti: cleaned(workloadJti, 256) });
      expect(unbound).not.toHaveProperty('agent_id');
      const untrusted = byPrefix(events, 'issuer', `${WORKLOAD_ISSUER}\uFFFD`)!;
      expect(untrusted).toMatchObject({ auth_method: 'workload', issuer: `${WORKLOAD_ISSUER}\uFFFD`, subject: WORKLOAD_SUBJECT });
      expect(untrusted).not.toHaveProperty('issuer_id');

      for (const e of events) {
        for (const [field, value] of Object.entries(e)) {
          if (typeof value !== 'string') continue;
          expect(UNSAFE.test(value), `${e.type}.${field}`).toBe(false);
          expect(value.length, `${e.type}.${field}`).toBeLessThanOrEqual(field === 'issuer' || field === 'subject' ? 512 : 256);
        }
      }
      expectNothingSent(JSON.stringify(events), secrets, assertions);
    });

    extra?.({ target: () => target, sent: () => ({ secrets, assertions }) });
  });
}

/** No secret, no assertion, and none of an assertion's header, claims or signature, in `text`. */
export function expectNothingSent(text: string, secrets: string[], assertions: string[]): void {
  expect(assertions.length).toBeGreaterThan(0);
  for (const secret of secrets) expect(text.includes(secret), 'a secret in the trail').toBe(false);
  for (const jwt of assertions) {
    for (const part of [jwt, ...jwt.split('.')]) expect(text.includes(part), 'an assertion (or one of its parts) in the trail').toBe(false);
  }
}
