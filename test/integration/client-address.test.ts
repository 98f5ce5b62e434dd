// The per-address failure limit counts the address the trusted proxy appended to X-Forwarded-For (the
// right-most hop with one proxy), not what the client wrote; unusable values fall back to the socket
// address and never reach Redis keys; IPv6 clients share one budget per /64.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { AdminClient, postJson, type AgentCredentials } from '../../kit/admin.js';
import { startService, REDIS_URL, type ServiceHandle } from '../support/service.js';

const FAIL_LIMIT = 3;

async function redisKeys(prefix: string): Promise<string[]> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true });
  try {
    await redis.connect();
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      keys.push(...batch);
      cursor = next;
    } while (cursor !== '0');
    return keys;
  } finally {
    redis.disconnect();
  }
}

describe('client address behind one trusted proxy (TRUST_PROXY=true)', () => {
  let service: ServiceHandle;
  let agent: AgentCredentials;
  let platformId: string;

  beforeAll(async () => {
    service = await startService({ mode: 'real', env: { TRUST_PROXY: 'true', RATE_LIMIT_AUTH_FAIL_POINTS: String(FAIL_LIMIT) } });
    const seeded = await new AdminClient(service).seed(['orders:read']);
    agent = seeded.agent;
    platformId = seeded.platform.platform_id;
  });
  afterAll(async () => {
    await service?.dispose();
  });

  const wrongSecret = (forwardedFor: string, url = service.publicUrl) =>
    postJson(`${url}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret: 'wrong-secret', platform_id: platformId }, { 'x-forwarded-for': forwardedFor });

  it('rotating the left-most hop does not escape the failure limit', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < FAIL_LIMIT + 3; i++) statuses.push((await wrongSecret(`10.${i}.${i}.${i}, 203.0.113.77`)).status);
    expect(statuses.slice(0, FAIL_LIMIT)).toEqual(new Array(FAIL_LIMIT).fill(401));
    expect(statuses.slice(FAIL_LIMIT + 1)).toEqual([429, 429]);
    const refused = await wrongSecret('198.51.100.99, 203.0.113.77');
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ error_code: 'rate_limited' });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // Another client behind the same proxy keeps its own budget.
    expect((await wrongSecret('198.51.100.99, 203.0.113.78')).status).toBe(401);
  });

  // The HTTP core refuses a request head over 4 KiB itself (431), so the longest values a client can get to
  // the service are ~3 KB: longer than the 1 KiB the service reads of the header.
  it('garbage and oversized values fall back to the socket address, and Redis keys stay short', async () => {
    const garbage = ['unknown', '[2001:db8::1]:443', '203.0.113.5:8080', 'x'.repeat(3000), `${'y'.repeat(2500)}, not-an-ip`, ' , '];
    const statuses: number[] = [];
    for (const value of garbage) statuses.push((await wrongSecret(value)).status);
    // One budget (the socket's 127.0.0.1) for all of them: refused once it is spent.
    expect(statuses.slice(0, FAIL_LIMIT)).toEqual(new Array(FAIL_LIMIT).fill(401));
    expect(statuses.slice(FAIL_LIMIT + 1)).toEqual(new Array(garbage.length - FAIL_LIMIT - 1).fill(429));
    const keys = await redisKeys(service.env.REDIS_KEY_PREFIX);
    expect(keys.some((k) => k.endsWith(':{127.0.0.1}'))).toBe(true); // hash-tagged: one Cluster slot per key
    expect(keys.filter((k) => k.length > 200)).toEqual([]);
  });
});

describe('IPv6 clients', () => {
  let service: ServiceHandle;
  let agent: AgentCredentials;
  let platformId: string;
  let url: string;

  beforeAll(async () => {
    service = await startService({ mode: 'real', env: { HOST: '::1', TRUST_PROXY: 'true', TRUST_PROXY_HOPS: '1', RATE_LIMIT_AUTH_FAIL_POINTS: String(FAIL_LIMIT) } });
    url = `http://[::1]:${service.env.PORT}`;
    const seeded = await new AdminClient(service).seed(['orders:read']);
    agent = seeded.agent;
    platformId = seeded.platform.platform_id;
  });
  afterAll(async () => {
    await service?.dispose();
  });

  const wrongSecret = (headers: Record<string, string>) =>
    postJson(`${url}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret: 'wrong-secret', platform_id: platformId }, headers);

  it('addresses in one /64 share one failure budget; another /64 has its own', async () => {
    const statuses: number[] = [];
    for (let i = 1; i <= FAIL_LIMIT + 2; i++) statuses.push((await wrongSecret({ 'x-forwarded-for': `2001:db8:0:1:${randomBytes(2).toString('hex')}::${i}` })).status);
    expect(statuses.slice(0, FAIL_LIMIT)).toEqual(new Array(FAIL_LIMIT).fill(401));
    expect(statuses.slice(FAIL_LIMIT + 1)).toEqual([429]);
    expect((await wrongSecret({ 'x-forwarded-for': '2001:db8:0:2::1' })).status).toBe(401);
    // The limiters (checks reserved, failures) count under the /64, never under a single address.
    const keys = await redisKeys(service.env.REDIS_KEY_PREFIX);
    expect(keys.filter((k) => k.endsWith('{2001:db8:0:1::/64}')).map((k) => k.slice(service.env.REDIS_KEY_PREFIX!.length)).sort()).toEqual([
      'rl:authfail:{2001:db8:0:1::/64}',
      'rl:authfailed:{2001:db8:0:1::/64}',
    ]);
    expect(keys.filter((k) => /2001:db8:0:1:[0-9a-f]/.test(k))).toEqual([]);
  });

});

describe('client address behind proxies known by range (TRUST_PROXY_CIDRS)', () => {
  let service: ServiceHandle;
  let agent: AgentCredentials;
  let platformId: string;

  beforeAll(async () => {
    service = await startService({ mode: 'real', env: { TRUST_PROXY_CIDRS: '127.0.0.0/8, 10.0.0.0/8', RATE_LIMIT_AUTH_FAIL_POINTS: String(FAIL_LIMIT) } });
    const seeded = await new AdminClient(service).seed(['orders:read']);
    agent = seeded.agent;
    platformId = seeded.platform.platform_id;
  });
  afterAll(async () => {
    await service?.dispose();
  });

  const wrongSecret = (forwardedFor: string) =>
    postJson(`${service.publicUrl}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret: 'wrong-secret', platform_id: platformId }, { 'x-forwarded-for': forwardedFor });

  it('counts the right-most hop outside the proxy ranges, whatever the client wrote left of it', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < FAIL_LIMIT + 2; i++) statuses.push((await wrongSecret(`192.0.2.${i}, 203.0.113.50, 10.0.0.9`)).status);
    expect(statuses.slice(0, FAIL_LIMIT)).toEqual(new Array(FAIL_LIMIT).fill(401));
    expect(statuses.at(-1)).toBe(429);
    // Another client behind the same two proxies has its own budget.
    expect((await wrongSecret('192.0.2.1, 203.0.113.51, 10.0.0.9')).status).toBe(401);
  });
});
