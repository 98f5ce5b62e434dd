// The hostile inputs of the hostile-input suites (test/integration/hostile-input.test.ts over sockets to a service
// process, test/in-process/hostile-input.test.ts through inject): bodies, headers and paths for fast-check.
// `seeded()` names the seeded agent and platform (read when a value is generated).
import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import type { AgentCredentials, PlatformRecord } from '../../kit/admin.js';

export function hostileArbitraries(seeded: () => { agent: AgentCredentials; platform: PlatformRecord }) {
  const printable = (maxLength: number) => fc.string({ unit: 'grapheme-ascii', maxLength });
  const hostileString = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.string({ unit: 'binary', maxLength: 40 }), // any code point, lone surrogates included
    fc.constantFrom('', ' ', '\u0000', '\uffff', '\ud800', '__proto__', 'constructor', 'prototype', '$where', '{{7*7}}', "' OR 1=1 --", '../../etc/passwd'),
    fc.constant('x'.repeat(1025)),
  );
  const anyJson = fc.oneof(hostileString, fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.array(hostileString, { maxLength: 3 }), fc.jsonValue({ maxDepth: 3 }));

  /** JSON text built by hand, so "__proto__" stays an ordinary key on the wire. */
  type Raw = { raw: string };
  const toJson = (value: unknown): string => (typeof value === 'object' && value !== null && 'raw' in value ? (value as Raw).raw : JSON.stringify(value) ?? 'null');
  const objectText = (entries: [string, unknown][]) => `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${toJson(v)}`).join(',')}}`;

  const pollutionKey = fc.constantFrom('__proto__', 'constructor', 'prototype', 'hasOwnProperty', 'toString', 'valueOf', '__defineGetter__');
  const pollutionValue: fc.Arbitrary<Raw> = fc.letrec<{ node: Raw }>((tie) => ({
    node: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      anyJson.map((v) => ({ raw: JSON.stringify(v) ?? 'null' })),
      fc
        .array(fc.tuple(fc.oneof(pollutionKey, fc.constantFrom('api_key_id', 'secret', 'platform_id', 'scopes', 'profile', 'status', 'isAdmin', 'polluted')), tie('node')), { maxLength: 4 })
        .map((entries) => ({ raw: objectText(entries) })),
    ),
  })).node;

  const field = <T>(...options: fc.Arbitrary<T>[]) => fc.option(fc.oneof(...options), { nil: undefined, freq: 4 });
  const tokenBody = fc
    .record({
      api_key_id: field<unknown>(
        fc.constant('REAL'),
        fc.constant(`agnt_kid_${'0'.repeat(32)}`),
        fc.stringMatching(/^agnt_kid_[0-9a-f]{32}$/),
        anyJson,
      ),
      secret: field<unknown>(fc.constant('REAL'), anyJson),
      platform_id: field<unknown>(fc.constant('REAL'), fc.uuid(), anyJson),
      scopes: field<unknown>(fc.constant([]), fc.constant(['orders:read']), fc.array(hostileString, { maxLength: 4 }), anyJson),
      profile: field<unknown>(fc.constantFrom('svc-native-jwt', 'oauth-at-jwt'), anyJson),
      pollution: fc.array(fc.tuple(pollutionKey, pollutionValue), { maxLength: 3 }),
      shuffle: fc.boolean(),
    })
    .map(({ pollution, shuffle, ...fields }) => {
      const real: Record<string, unknown> = { api_key_id: seeded().agent.api_key_id, secret: seeded().agent.secret, platform_id: seeded().platform.platform_id };
      const entries: [string, unknown][] = Object.entries(fields)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => [k, v === 'REAL' ? real[k] : v]);
      const all: [string, unknown][] = [...entries, ...pollution];
      return objectText(shuffle ? all.reverse() : all);
    });

  const nestingBomb = fc
    .record({ depth: fc.integer({ min: 100, max: 7000 }), kind: fc.constantFrom('array', 'object', 'unclosed', 'inField') })
    .map(({ depth, kind }) => {
      if (kind === 'array') return '['.repeat(depth) + ']'.repeat(depth);
      const nested = '{"a":'.repeat(Math.min(depth, 2500)) + '1' + '}'.repeat(Math.min(depth, 2500));
      if (kind === 'object') return nested;
      if (kind === 'unclosed') return '['.repeat(depth);
      return objectText([['api_key_id', `agnt_kid_${'1'.repeat(32)}`], ['secret', 'x'], ['platform_id', randomUUID()], ['extra', { raw: '['.repeat(Math.min(depth, 5000)) + ']'.repeat(Math.min(depth, 5000)) }]]);
    });

  const bodyBytes = fc.oneof(
    tokenBody.map((t) => Buffer.from(t)),
    nestingBomb.map((t) => Buffer.from(t)),
    fc.jsonValue({ maxDepth: 4 }).map((v) => Buffer.from(JSON.stringify(v) ?? '')),
    fc.uint8Array({ maxLength: 600 }).map((a) => Buffer.from(a)), // invalid UTF-8 included
    fc.string({ unit: 'binary', maxLength: 200 }).map((s) => Buffer.from(s)),
    // Valid JSON around invalid UTF-8 bytes in keys and values.
    fc.uint8Array({ minLength: 1, maxLength: 40 }).map((a) =>
      Buffer.concat([Buffer.from(`{"api_key_id":"agnt_kid_${'2'.repeat(32)}","platform_id":"${randomUUID()}","secret":"`), Buffer.from(a.map((b) => b | 0x80)), Buffer.from('","\xff":1}', 'latin1')]),
    ),
  );

  const contentType = fc.oneof(
    fc.constantFrom('application/json', 'application/json; charset=utf-8', 'APPLICATION/JSON', 'application/json;;;', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonx', ''),
    printable(60),
  );

  const headers = fc.record(
    {
      'Content-Type': contentType,
      'X-Forwarded-For': fc.oneof(fc.ipV4(), fc.ipV6(), printable(80), fc.constant('f'.repeat(4000))),
      'X-Request-Id': fc.oneof(printable(200), fc.constant('ok-id-1'), fc.constant('r'.repeat(200))),
      'If-None-Match': fc.oneof(printable(60), fc.constant('*'), fc.constant('W/"x", "y"')),
      Authorization: fc.oneof(printable(80), fc.constant('Bearer ' + 'a'.repeat(3000))),
      Accept: printable(40),
      Cookie: printable(100),
      Origin: printable(40),
      'Accept-Encoding': fc.constantFrom('gzip', 'br, deflate', '*', 'identity;q=0'),
      Expect: fc.constant('100-continue'),
    },
    { requiredKeys: [] },
  );

  const segment = fc.stringMatching(/^[A-Za-z0-9._~!$&'()*+,;=:@%-]{0,24}$/);
  const path = fc.oneof(
    fc.constantFrom(...['/api/v1/auth/token', '/api/v1/auth/agents/me/platforms', '/.well-known/jwks.json', '/openapi.json', '/', '/api', '/api/v1', '/admin/v1/agents', '/metrics', '/healthz']),
    fc.constant('SCOPES_REAL'),
    fc.tuple(fc.constantFrom('/api/v1/auth/token', '/.well-known/jwks.json', '/openapi.json', 'SCOPES_REAL'), fc.constantFrom('/', '//', '/..', '%00', '?a=1', `?${'q'.repeat(3000)}`, '#frag', '/%2e%2e', ';x', '.bak', '%20'))
      .map(([a, b]) => a + b),
    segment.map((id) => `/api/v1/platforms/${id}/scopes.yaml`),
    fc.array(segment, { minLength: 1, maxLength: 6 }).map((s) => `/${s.join('/')}`),
    fc.constant(`/${'a/'.repeat(2000)}`),
  );

  const resolvePath = (p: string) => p.replace('SCOPES_REAL', `/api/v1/platforms/${seeded().platform.platform_id}/scopes.yaml`);

  return { printable, hostileString, anyJson, bodyBytes, contentType, headers, path, segment, resolvePath };
}

/** Limits out of the way: hostile runs send thousands of requests from a few addresses. */
export const HOSTILE_ENV = { TRUST_PROXY: 'true', RATE_LIMIT_AUTH_FAIL_POINTS: '1000000', RATE_LIMIT_TOKEN_POINTS: '1000000' };

/** Everything an attacker could change through the public endpoints, as one comparable text (read via the admin API). */
export async function recordsSnapshot(admin: { request(method: string, path: string): Promise<{ status: number; body: unknown }> }, agentId: string): Promise<string> {
  const [agents, platforms, keys, grants] = await Promise.all([
    admin.request('GET', '/admin/v1/agents'),
    admin.request('GET', '/admin/v1/platforms'),
    admin.request('GET', '/admin/v1/keys'),
    admin.request('GET', `/admin/v1/agents/${agentId}/grants`),
  ]);
  const failed = [agents, platforms, keys, grants].filter((r) => r.status !== 200);
  if (failed.length > 0) throw new Error(`admin reads failed: ${failed.map((r) => r.status).join(', ')}`);
  return JSON.stringify({ agents: agents.body, platforms: platforms.body, keys: keys.body, grants: grants.body });
}
