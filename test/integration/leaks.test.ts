// Nothing leaks: after a mixed workload at LOG_LEVEL=debug with access logs, no agent secret (current,
// rotated away, or merely attempted), no admin token, no key-encryption key and no private key material
// (plain or encrypted) appears in anything the service emitted: its stdout/stderr, any response we got
// (status line, headers, body), /metrics, or the JWKS. Redis holds neither secrets nor their argon2 hashes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPrivateKey, randomBytes } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { Redis } from 'ioredis';
import { decryptPrivateKey } from '../../src/adapters/crypto/key-encryption.js';
import { REDIS_URL, startService, type ServiceHandle } from '../support/service.js';
import { dumpRedis } from '../support/faults.js';
import { sleep } from '../../kit/wait.js';

interface Emitted {
  label: string;
  text: string;
}

/** Distinctive forms of a value: itself, and its base64/hex encodings (so an encoded copy is caught too). */
function forms(value: string): string[] {
  const bytes = Buffer.from(value);
  return [value, bytes.toString('base64'), bytes.toString('base64url'), bytes.toString('hex')].filter((v) => v.length >= 16);
}

describe('nothing leaks', () => {
  let service: ServiceHandle;
  const kekHex = randomBytes(32).toString('hex');
  const redisPrefix = `ace-leaks-${randomBytes(4).toString('hex')}:`;
  /** Everything we received that is not meant to show a secret. */
  const emitted: Emitted[] = [];
  /** Answers whose purpose is to show a secret once (agent creation and secret rotation). */
  const secretAnswers: Emitted[] = [];
  const secrets = new Map<string, string>(); // value -> label

  beforeAll(async () => {
    service = await startService({
      mode: 'real',
      redisKeyPrefix: redisPrefix,
      env: {
        LOG_LEVEL: 'debug',
        ACCESS_LOG: 'true',
        TRUST_PROXY: 'true',
        KEY_ENCRYPTION_KEY: kekHex,
        RATE_LIMIT_TOKEN_POINTS: '5',
        RATE_LIMIT_AUTH_FAIL_POINTS: '3',
        KEY_PROPAGATION_SECONDS: '2',
      },
    });
  });

  afterAll(async () => {
    await service?.dispose();
  });

  const capture = async (label: string, url: string, init: RequestInit = {}, showsSecret = false) => {
    const response = await fetch(url, init);
    const body = await response.text();
    const head = `${response.status} ${response.statusText}\n${[...response.headers].map(([k, v]) => `${k}: ${v}`).join('\n')}`;
    (showsSecret ? secretAnswers : emitted).push({ label, text: `${head}\n\n${body}` });
    let json: any;
    try {
      json = JSON.parse(body);
    } catch {
      json = undefined;
    }
    return { status: response.status, json, body };
  };
  const adminCall = (method: string, route: string, body?: unknown, showsSecret = false, token = service.adminToken) =>
    capture(`${method} ${route}`, `${service.adminUrl}${route}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    }, showsSecret);
  let address = 0;
  const publicPost = (route: string, body: unknown, contentType = 'application/json', fixedAddress?: string) =>
    capture(`POST ${route}`, `${service.publicUrl}${route}`, {
      method: 'POST',
      headers: { 'content-type': contentType, 'x-forwarded-for': fixedAddress ?? `198.51.100.${++address % 250}` },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const attempted = (label: string) => {
    const value = `${label}-${randomBytes(18).toString('base64url')}`;
    secrets.set(value, `attempted secret (${label})`);
    return value;
  };

  it('runs a mixed workload, then finds no secret, token, key or hash in anything emitted', async () => {
    // --- Workload --------------------------------------------------------------------------------
    const platform = (await adminCall('POST', '/admin/v1/platforms', {
      name: 'Shop',
      domain: 'shop.example',
      verification_status: 'verified',
      scopes: [{ name: 'orders:read' }, { name: 'orders:write' }],
      routes: [{ method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] }],
    })).json;
    const agents = [];
    for (const name of ['alpha', 'beta', 'gamma']) {
      const created = await adminCall('POST', '/admin/v1/agents', { name }, true);
      expect(created.status).toBe(201);
      secrets.set(created.json.secret, `secret of ${name}`);
      await adminCall('PUT', `/admin/v1/agents/${created.json.agent_id}/grants/${platform.platform_id}`, { scopes: ['orders:read'] });
      agents.push(created.json);
    }
    const [alpha, beta, gamma] = agents;
    const tokenBody = (agent: { api_key_id: string }, secret: string, extra: Record<string, unknown> = {}) => ({
      api_key_id: agent.api_key_id,
      secret,
      platform_id: platform.platform_id,
      ...extra,
    });

    // Successes on every public endpoint.
    expect((await publicPost('/api/v1/auth/token', tokenBody(alpha, alpha.secret))).status).toBe(200);
    expect((await publicPost('/api/v1/auth/agents/me/platforms', { api_key_id: alpha.api_key_id, secret: alpha.secret })).status).toBe(200);
    await capture('scope file', `${service.publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`);
    await capture('openapi', `${service.publicUrl}/openapi.json`);

    // Refusals that carry a secret in the request: every one must keep it out of the answer and the logs.
    expect((await publicPost('/api/v1/auth/token', tokenBody(alpha, attempted('wrong')))).status).toBe(401);
    expect((await publicPost('/api/v1/auth/token', tokenBody({ api_key_id: `agnt_kid_${randomBytes(16).toString('hex')}` }, attempted('unknown-id')))).status).toBe(401);
    expect((await publicPost('/api/v1/auth/agents/me/platforms', { api_key_id: beta.api_key_id, secret: attempted('listing-wrong') })).status).toBe(401);
    expect((await publicPost('/api/v1/auth/token', { ...tokenBody(alpha, alpha.secret), platform_id: 'not-a-uuid' })).status).toBe(422);
    expect((await publicPost('/api/v1/auth/token', { ...tokenBody(alpha, alpha.secret), profile: 'oauth-at-jwt-v2' })).status).toBe(422);
    expect((await publicPost('/api/v1/auth/token', { ...tokenBody(alpha, alpha.secret), scopes: 'orders:read' })).status).toBe(422);
    expect((await publicPost('/api/v1/auth/token', { ...tokenBody(alpha, alpha.secret), scopes: ['orders:write'] })).status).toBe(403);
    expect((await publicPost('/api/v1/auth/token', { ...tokenBody(alpha, alpha.secret), api_key_id: 'agnt_kid_bad' })).status).toBe(422);
    const longSecret = attempted('long').padEnd(1100, 'L');
    secrets.set(longSecret, 'attempted secret (too long)');
    expect((await publicPost('/api/v1/auth/token', tokenBody(alpha, longSecret))).status).toBe(422);
    expect((await publicPost('/api/v1/auth/token', `{"api_key_id":"${alpha.api_key_id}","secret":"${alpha.secret}",`)).status).toBe(400);
    expect((await publicPost('/api/v1/auth/token', JSON.stringify(tokenBody(alpha, alpha.secret)), 'text/plain')).status).toBe(415);
    expect((await publicPost('/api/v1/auth/token', JSON.stringify({ ...tokenBody(alpha, alpha.secret), pad: 'p'.repeat(17 * 1024) }))).status).toBe(413);
    // Failure limit per address (429), then the per-key limit.
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await publicPost('/api/v1/auth/token', tokenBody(gamma, attempted(`limited-${i}`)), 'application/json', '192.0.2.200')).status);
    expect(statuses).toContain(429);
    const perKey = [];
    for (let i = 0; i < 7; i++) perKey.push((await publicPost('/api/v1/auth/token', tokenBody(gamma, gamma.secret))).status);
    expect(perKey).toContain(429);

    // Secret rotations: with a grace period (both work), and immediate (the old one stops).
    const alpha2 = await adminCall('POST', `/admin/v1/agents/${alpha.agent_id}/secret/rotate`, { grace_seconds: 60 }, true);
    secrets.set(alpha2.json.secret, 'rotated secret of alpha');
    expect((await publicPost('/api/v1/auth/token', tokenBody(alpha, alpha.secret))).status).toBe(200);
    expect((await publicPost('/api/v1/auth/token', tokenBody(alpha, alpha2.json.secret))).status).toBe(200);
    const beta2 = await adminCall('POST', `/admin/v1/agents/${beta.agent_id}/secret/rotate`, undefined, true);
    secrets.set(beta2.json.secret, 'rotated secret of beta');
    expect((await publicPost('/api/v1/auth/token', tokenBody(beta, beta.secret))).status).toBe(401);
    expect((await publicPost('/api/v1/auth/token', tokenBody(beta, beta2.json.secret))).status).toBe(200);

    // Signing-key rotation: publish, wait for activation, sign with the new key, retire the old one.
    const oldKid = (await adminCall('GET', '/admin/v1/keys')).json.keys[0].kid;
    const rotated = await adminCall('POST', '/admin/v1/keys/rotate');
    expect(rotated.status).toBe(200);
    await capture('jwks after rotate', `${service.publicUrl}/.well-known/jwks.json`);
    // The new key activates after the propagation window: wait for the key list to say so.
    while ((await adminCall('GET', '/admin/v1/keys')).json.keys.find((k: { kid: string }) => k.kid === rotated.json.kid)?.state !== 'active') await sleep(100);
    const signed = await publicPost('/api/v1/auth/token', tokenBody(beta, beta2.json.secret));
    expect(signed.status).toBe(200);
    expect(JSON.parse(Buffer.from(signed.json.access_token.split('.')[0], 'base64url').toString()).kid).toBe(rotated.json.kid);
    expect((await adminCall('POST', `/admin/v1/keys/${oldKid}/retire`)).status).toBe(200);
    expect((await adminCall('POST', `/admin/v1/keys/${rotated.json.kid}/retire`)).status).toBe(409);

    // Admin refusals and odd requests; an agent made inactive.
    const wrongAdmin = `wrong-admin-${randomBytes(16).toString('hex')}`;
    secrets.set(wrongAdmin, 'attempted admin token');
    expect((await adminCall('GET', '/admin/v1/agents', undefined, false, wrongAdmin)).status).toBe(401);
    expect((await adminCall('POST', '/admin/v1/agents', { name: 7 })).status).toBe(422);
    expect((await adminCall('GET', `/admin/v1/agents/${crypto.randomUUID()}`)).status).toBe(404);
    await adminCall('GET', '/admin/v1/agents');
    await adminCall('GET', `/admin/v1/agents/${alpha.agent_id}`);
    await adminCall('GET', `/admin/v1/agents/${alpha.agent_id}/grants`);
    await adminCall('PATCH', `/admin/v1/agents/${gamma.agent_id}`, { status: 'inactive' });
    expect((await publicPost('/api/v1/auth/token', tokenBody(alpha, alpha2.json.secret))).status).toBe(200);
    await capture('unknown path', `${service.publicUrl}/nothing-here`);
    await capture('wrong method', `${service.publicUrl}/api/v1/auth/token`);
    await capture('readyz', `${service.adminUrl}/readyz`);
    await capture('healthz', `${service.adminUrl}/healthz`);

    const jwks = await capture('jwks', `${service.publicUrl}/.well-known/jwks.json`);
    const metrics = await capture('metrics', `${service.adminUrl}/metrics`);
    // Stopping the service reads its output to the end: the last lines (shutdown included) are searched too.
    expect((await service.stop('SIGTERM')).code).toBe(0);

    // --- What must never appear --------------------------------------------------------------------
    const needles = new Map<string, string>();
    for (const [value, label] of secrets) for (const form of forms(value)) needles.set(form, label);
    for (const form of forms(service.adminToken)) needles.set(form, 'admin token');
    const kek = Buffer.from(kekHex, 'hex');
    for (const form of [kekHex, kekHex.toUpperCase(), kek.toString('base64'), kek.toString('base64url')]) needles.set(form, 'KEY_ENCRYPTION_KEY');

    const sql = postgres(service.database!.url, { max: 1, onnotice: () => {} });
    const keyRows = await sql`SELECT kid, private_key_encrypted FROM signing_keys`;
    const hashRows = await sql`SELECT secret_hash, previous_secret_hash FROM agents`;
    await sql.end();
    expect(keyRows.length).toBeGreaterThanOrEqual(2);
    for (const row of keyRows) {
      const encrypted: string = row.private_key_encrypted;
      needles.set(encrypted, `encrypted private key ${row.kid}`);
      needles.set(encrypted.split('.')[1].slice(0, 64), `encrypted private key ${row.kid} (payload start)`);
      const pem = decryptPrivateKey(kek, encrypted, row.kid);
      const pemBody = pem.split('\n').filter((line) => line && !line.startsWith('-----'));
      for (const line of pemBody.filter((l) => l.length >= 32)) needles.set(line, `private key PEM ${row.kid}`);
      const jwk = createPrivateKey(pem).export({ format: 'jwk' });
      for (const member of ['d', 'p', 'q', 'dp', 'dq', 'qi'] as const) needles.set(jwk[member]!, `private key member ${member} of ${row.kid}`);
    }
    const hashes: string[] = [];
    for (const row of hashRows) for (const hash of [row.secret_hash, row.previous_secret_hash]) if (hash) hashes.push(hash);
    expect(hashes.length).toBeGreaterThanOrEqual(4);
    for (const hash of hashes) {
      needles.set(hash, 'argon2 hash');
      const [salt, digest] = hash.split('$').slice(-2); // $argon2id$v=19$m=...,t=...,p=...$salt$digest
      needles.set(salt, 'argon2 salt');
      needles.set(digest, 'argon2 digest');
    }

    const haystacks: Emitted[] = [{ label: 'service stdout+stderr', text: service.output() }, ...emitted];
    // The logs did record the workload (debug level, access log): the search is not over an empty file.
    expect(service.output().split('\n').filter((l) => l.includes('"msg":"request"')).length).toBeGreaterThan(20);
    const leaks: string[] = [];
    for (const haystack of haystacks) {
      for (const [needle, label] of needles) if (haystack.text.includes(needle)) leaks.push(`${label} in ${haystack.label}`);
      if (/PRIVATE KEY-----/.test(haystack.text)) leaks.push(`a PEM private key in ${haystack.label}`);
      if (/\$argon2id?\$/.test(haystack.text)) leaks.push(`an argon2 hash in ${haystack.label}`);
    }
    expect(leaks).toEqual([]);

    // The once-only answers show their own secret and nothing else sensitive.
    for (const answer of secretAnswers) {
      const own = [...secrets].filter(([value]) => answer.text.includes(value)).map(([, label]) => label);
      expect(own.length, answer.label).toBe(1);
      for (const [needle, label] of needles) {
        if (!secrets.has(needle) && answer.text.includes(needle) && !forms(JSON.parse(answer.text.split('\n\n')[1]).secret).includes(needle)) {
          leaks.push(`${label} in ${answer.label}`);
        }
      }
      expect(answer.text).toMatch(/cache-control: no-store/i);
    }
    expect(leaks).toEqual([]);

    // JWKS: public members only.
    for (const key of jwks.json.keys) expect(Object.keys(key).sort()).toEqual(['alg', 'e', 'kid', 'kty', 'n', 'use']);
    expect(metrics.body).toContain('ace_http_requests_total');

    // Redis: no secret, no hash, no key material, under any key or value of this service.
    const redis = new Redis(REDIS_URL);
    const stored = await dumpRedis(redis, redisPrefix);
    redis.disconnect();
    expect(stored.size).toBeGreaterThan(0);
    const inRedis: string[] = [];
    for (const [key, value] of stored) {
      for (const [needle, label] of needles) if (key.includes(needle) || value.includes(needle)) inRedis.push(`${label} under ${key}`);
      if (/\$argon2/.test(value) || /PRIVATE KEY/.test(value)) inRedis.push(`hash or key material under ${key}`);
    }
    expect(inRedis).toEqual([]);
  });

  it('a generated admin token and key-encryption key (none configured) are written to DATA_DIR, never printed', async () => {
    const generated = await startService({ mode: 'embedded', env: { ADMIN_TOKEN: '', KEY_ENCRYPTION_KEY: '', LOG_LEVEL: 'debug', ACCESS_LOG: 'true' } });
    try {
      const token = readFileSync(path.join(generated.dataDir, 'admin-token'), 'utf8').trim();
      const kek = readFileSync(path.join(generated.dataDir, 'key-encryption-key'), 'utf8').trim();
      expect(token.length).toBeGreaterThanOrEqual(32);
      expect(kek).toMatch(/^[0-9a-f]{64}$/);
      for (const file of ['admin-token', 'key-encryption-key']) expect(statSync(path.join(generated.dataDir, file)).mode & 0o777).toBe(0o600);
      const refused = await fetch(`${generated.adminUrl}/admin/v1/agents`);
      expect(refused.status).toBe(401);
      const allowed = await fetch(`${generated.adminUrl}/admin/v1/agents`, { headers: { authorization: `Bearer ${token}` } });
      expect(allowed.status).toBe(200);
      const metrics = await (await fetch(`${generated.adminUrl}/metrics`)).text();
      await generated.stop('SIGTERM'); // its whole output, read to the end
      for (const text of [generated.output(), metrics, await refused.text()]) {
        expect(text).not.toContain(token);
        expect(text).not.toContain(kek);
      }
      // The log says where the files are instead.
      expect(generated.output()).toContain(path.join(generated.dataDir, 'admin-token'));
    } finally {
      await generated.dispose();
    }
  });
});
