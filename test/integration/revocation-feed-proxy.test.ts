// The revocation feed through a hostile proxy (kit/feed-proxy.ts) between the middleware and a real
// service process: one that passes the signed stream heads and strips every other SET (poll answers and
// WebSocket frames), and one that swallows the WebSocket upgrade. The promise: with failMode "closed", a
// deactivated agent's token is refused within staleAfterSeconds + 3 s and stays refused, also once the proxy
// passes everything again; with the upgrade swallowed, good tokens keep 200 and a revoked one is refused
// within the poll interval + 2 s. And the other side of the rule: SETs that expired (purged) are no gap, so a
// platform that starts after a purge is current at once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type ServiceHandle } from '../support/service.js';
import { AdminClient, type PlatformRecord } from '../../kit/admin.js';
import { startFeedProxy, type FeedProxy } from '../../kit/feed-proxy.js';
import { waitFor } from '../../kit/wait.js';
import { call, startPlatform, token, type Platform } from '../support/revocation.js';
import type { RevocationFeedOptions } from '../../packages/middleware/src/index.js';

/**
 * Short, yet above what a healthy feed needs: the service re-signs its head when older than half a heartbeat
 * (2.5 s by default), so a head can be that old when it arrives, plus a poll period, plus the poll itself.
 */
const STALE_AFTER_SECONDS = 5;
const POLL_SECONDS = 1;

let service: ServiceHandle;
let admin: AdminClient;
let shop: PlatformRecord;
let feedToken: string;

/** Entries expire TTL_SECONDS after the change (no clock skew, no slack): the purge test waits for one. */
const TTL_SECONDS = 10;

beforeAll(async () => {
  service = await startService({
    mode: 'embedded',
    env: { TOKEN_TTL_SECONDS: String(TTL_SECONDS), KEY_CLOCK_SKEW_SECONDS: '0', REVOCATION_ISSUED_SLACK_SECONDS: '0' },
  });
  admin = new AdminClient(service);
  shop = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'read' }] });
  feedToken = await admin.feedToken(shop.platform_id);
}, 90_000);

afterAll(async () => {
  await service?.dispose();
});

async function grantedAgentToken(name: string) {
  const agent = await admin.createAgent(name);
  await admin.grant(agent.agent_id, shop.platform_id, ['read']);
  return { agent, token: await token(service.publicUrl, agent.api_key_id, agent.secret, shop.platform_id) };
}

/** A platform whose middleware reaches the service through `proxy`. */
async function platformBehind(proxy: FeedProxy, feed: RevocationFeedOptions): Promise<Platform> {
  return startPlatform({ serviceUrl: proxy.url, platformId: shop.platform_id, issuer: service.publicUrl, feedToken, feed: { failMode: 'closed', staleAfterSeconds: STALE_AFTER_SECONDS, pollIntervalSeconds: POLL_SECONDS, ...feed } });
}

/** Calls until the platform refuses the token (401 revoked, or 503 while its copy is stale); the ms it took. */
async function msUntilRefused(platform: Platform, accessToken: string, since: number, limitMs: number): Promise<number> {
  await waitFor('the token refused', async () => (await call(platform.url, accessToken)).status !== 200, limitMs, 50);
  return Date.now() - since;
}

/** Calls for `ms` and returns every status seen. */
async function statusesFor(platform: Platform, accessToken: string, ms: number): Promise<Set<number>> {
  const seen = new Set<number>();
  const until = Date.now() + ms;
  while (Date.now() < until) {
    seen.add((await call(platform.url, accessToken)).status);
    await new Promise((r) => setTimeout(r, 100));
  }
  return seen;
}

describe('a proxy that passes the signed heads and strips every other SET', () => {
  for (const transport of ['poll only', 'WebSocket'] as const) {
    it(`${transport}: a deactivated agent's token is refused within staleAfterSeconds + 3 s and stays refused, also once the proxy passes everything again`, async () => {
      const proxy = await startFeedProxy(service.publicUrl);
      const platform = await platformBehind(proxy, transport === 'poll only' ? { webSocket: false } : {});
      try {
        if (transport === 'WebSocket') await waitFor('the feed socket open', () => platform.verifier.revocationStats()!.connected, 10_000, 50);
        const { agent, token: revoked } = await grantedAgentToken(`stripped-${transport}`);
        expect((await call(platform.url, revoked)).status).toBe(200);

        proxy.set({ stripSets: true });
        const since = Date.now();
        await admin.patchAgent(agent.agent_id, { status: 'inactive' });
        expect(await msUntilRefused(platform, revoked, since, (STALE_AFTER_SECONDS + 3) * 1000)).toBeLessThanOrEqual((STALE_AFTER_SECONDS + 3) * 1000);
        await waitFor('the proxy stripped the revocation SET', () => proxy.counts.setsStripped > 0 && proxy.counts.headsPassed > 0, 5000, 50);
        expect(platform.verifier.revocationStats()).toMatchObject({ stale: true, gap: true });
        // Heads keep passing, each showing the gap: none of them makes the copy current again.
        expect(await statusesFor(platform, revoked, 2000)).not.toContain(200);

        // The proxy passes everything again: the SET arrives, the token stays refused (now as revoked).
        proxy.set({ stripSets: false });
        await waitFor('the revocation applied', async () => {
          const { status, challenge } = await call(platform.url, revoked);
          expect(status).not.toBe(200);
          return status === 401 && challenge!.includes('error="invalid_token"');
        }, 10_000, 50);
        await waitFor('the copy current again', () => platform.verifier.revocationStats()!.stale === false, 10_000, 50);
        expect(platform.verifier.revocationStats()!.gap).toBe(false);
        if (transport === 'WebSocket') expect(platform.verifier.revocationStats()!.connected).toBe(true);
        const { token: good } = await grantedAgentToken(`good-${transport}`);
        expect((await call(platform.url, good)).status).toBe(200);
        expect((await call(platform.url, revoked)).status).toBe(401);
      } finally {
        await platform.close();
        await proxy.close();
      }
    }, 60_000);
  }
});

describe('a proxy that swallows the WebSocket upgrade', () => {
  it('good tokens keep 200, a revoked one is refused within the poll interval + 2 s, and the swallowed upgrade is counted as a drop', async () => {
    const proxy = await startFeedProxy(service.publicUrl, { swallowUpgrades: true });
    const platform = await platformBehind(proxy, { handshakeTimeoutSeconds: 2 });
    try {
      const { token: good } = await grantedAgentToken('good-swallowed');
      const { agent, token: revoked } = await grantedAgentToken('revoked-swallowed');
      // Longer than staleAfterSeconds: only polls keep the copy current while the socket never opens.
      expect([...(await statusesFor(platform, good, (STALE_AFTER_SECONDS + 2) * 1000))]).toEqual([200]);
      expect(proxy.counts.upgradesSwallowed).toBeGreaterThan(0);

      const since = Date.now();
      await admin.patchAgent(agent.agent_id, { status: 'inactive' });
      await waitFor('the revoked token refused', async () => (await call(platform.url, revoked)).status === 401, 10_000, 50);
      expect(Date.now() - since).toBeLessThanOrEqual((POLL_SECONDS + 2) * 1000);
      expect((await call(platform.url, good)).status).toBe(200);

      await waitFor('the swallowed upgrade counted as a drop', () => (platform.verifier.revocationStats()!.socketDrops ?? 0) > 0, 10_000, 50);
      expect(platform.verifier.revocationStats()).toMatchObject({ connected: false, lastSocketDrop: 'handshake timeout', stale: false });
    } finally {
      await platform.close();
      await proxy.close();
    }
  }, 60_000);
});

describe('expired is not dropped', () => {
  it('a platform that starts after SETs were purged is current at once: the head proves them expired', async () => {
    const headOf = async () => {
      const response = await fetch(`${service.publicUrl}/api/v1/platforms/${shop.platform_id}/revocations`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${feedToken}` },
        body: JSON.stringify({ returnImmediately: true }),
      });
      const { sets } = (await response.json()) as { sets: Record<string, string> };
      const payload = JSON.parse(Buffer.from(sets[`${shop.platform_id}:head`]!.split('.')[1]!, 'base64url').toString());
      return payload.events['urn:agent-credential-exchange:secevent:stream-head'] as { seq: number; live?: [number, number][] };
    };
    /** Some sequence up to the head is no longer live: its entry expired. */
    const somePurged = (head: { seq: number; live?: [number, number][] }) =>
      Array.isArray(head.live) && head.live.reduce((count, [from, to]) => count + to - from + 1, 0) < head.seq;
    // The earlier tests' entries have expired by now; alone, this test makes one and waits TTL_SECONDS.
    if (!somePurged(await headOf())) {
      const { agent } = await grantedAgentToken('purged');
      await admin.patchAgent(agent.agent_id, { status: 'inactive' });
      await waitFor('an entry purged', async () => somePurged(await headOf()), (TTL_SECONDS + 10) * 1000, 250);
    }
    const { seq } = await headOf();

    const proxy = await startFeedProxy(service.publicUrl);
    const platform = await platformBehind(proxy, { webSocket: false });
    try {
      expect(platform.verifier.revocationStats()).toMatchObject({ stale: false, gap: false });
      expect(platform.verifier.revocationStats()!.seq).toBeGreaterThanOrEqual(seq);
      const { token: good } = await grantedAgentToken('after-purge');
      expect((await call(platform.url, good)).status).toBe(200);
    } finally {
      await platform.close();
      await proxy.close();
    }
  }, 60_000);
});
