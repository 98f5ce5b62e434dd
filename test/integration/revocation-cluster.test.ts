// Cluster mode (WORKERS=2, one port shared by two HTTP processes): an admin write handled by either process
// reaches subscribers held by both, over the Redis bus every process listens to.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type ServiceHandle } from '../support/service.js';
import { AdminClient, type PlatformRecord } from '../../kit/admin.js';
import { call, msUntilRefused, startPlatform, token, type Platform } from '../support/revocation.js';

const ISSUER = 'https://ace.test';
let service: ServiceHandle;
let admin: AdminClient;
let shop: PlatformRecord;
// Several middleware instances of one platform: the kernel spreads their sockets over both processes.
const platforms: Platform[] = [];

beforeAll(async () => {
  service = await startService({ mode: 'real', env: { WORKERS: '2', ISSUER } });
  admin = new AdminClient(service);
  shop = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'read' }] });
  const feedToken = await admin.feedToken(shop.platform_id);
  for (let i = 0; i < 6; i++) platforms.push(await startPlatform({ serviceUrl: service.publicUrl, platformId: shop.platform_id, issuer: ISSUER, feedToken }));
}, 90_000);

afterAll(async () => {
  for (const platform of platforms) await platform.close();
  await service?.dispose();
});

describe('revocation in cluster mode', () => {
  it('every middleware instance refuses the token, whichever process holds its socket', async () => {
    for (let round = 0; round < 3; round++) {
      const agent = await admin.createAgent(`cluster-${round}`);
      await admin.grant(agent.agent_id, shop.platform_id, ['read']);
      const t = await token(service.publicUrl, agent.api_key_id, agent.secret, shop.platform_id);
      for (const platform of platforms) expect((await call(platform.url, t)).status).toBe(200);
      await admin.patchAgent(agent.agent_id, { status: 'inactive' });
      const at = Date.now();
      const ms = await Promise.all(platforms.map((p) => msUntilRefused(p.url, t, at)));
      for (const value of ms) expect(value).toBeLessThan(5000);
    }
    const metrics = await (await fetch(`${service.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/^ace_revocation_subscribers 6$/m);
  }, 60_000);
});
