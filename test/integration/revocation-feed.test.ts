// The revocation feed (SSF SETs) on the embedded default (one process, no Redis), the middleware's refusal
// of forged, tampered and misdirected SETs, and a socket that drops SETs but passes the signed heads.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeyPair, SignJWT } from 'jose';
import { startService, type ServiceHandle } from '../support/service.js';
import { AdminClient, type PlatformRecord } from '../../kit/admin.js';
import { call, msUntilRefused, startPlatform, token, type Platform } from '../support/revocation.js';
import { JwksCache } from '../../packages/middleware/src/jwks-cache.js';
import { DocumentRejectedError, RevocationReceiver } from '../../packages/middleware/src/revocation-feed.js';

let service: ServiceHandle;
let admin: AdminClient;
let shop: PlatformRecord;
let other: PlatformRecord;
let platform: Platform;
let issuer: string;
/** One feed token per platform (AdminClient.feedToken makes a new credential each call). */
const feedTokens = new Map<string, Promise<string>>();
const feedTokenOf = (platformId: string) => {
  if (!feedTokens.has(platformId)) feedTokens.set(platformId, admin.feedToken(platformId));
  return feedTokens.get(platformId)!;
};

beforeAll(async () => {
  service = await startService({ mode: 'embedded' });
  issuer = service.publicUrl;
  admin = new AdminClient(service);
  shop = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'read' }] });
  other = await admin.createPlatform({ name: 'Other', scopes: [{ name: 'read' }] });
  platform = await startPlatform({ serviceUrl: service.publicUrl, platformId: shop.platform_id, issuer, feedToken: await feedTokenOf(shop.platform_id) });
}, 90_000);

afterAll(async () => {
  await platform?.close();
  await service?.dispose();
});

async function grantedAgent(name: string) {
  const agent = await admin.createAgent(name);
  await admin.grant(agent.agent_id, shop.platform_id, ['read']);
  return agent;
}

const feedUrl = (platformId: string) => `${service.publicUrl}/api/v1/platforms/${platformId}/revocations`;
async function pollSets(platformId: string): Promise<Record<string, string>> {
  const response = await fetch(feedUrl(platformId), { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${await feedTokenOf(platformId)}` }, body: '{}' });
  return ((await response.json()) as { sets: Record<string, string> }).sets;
}
const payloadOf = (jws: string) => JSON.parse(Buffer.from(jws.split('.')[1], 'base64url').toString());

async function newFeed() {
  const jwks = new JwksCache({ url: `${service.publicUrl}/.well-known/jwks.json`, fetch, cooldownMs: 0, defaultMaxAgeMs: 60_000, maxMaxAgeMs: 60_000, timeoutMs: 5000 });
  return new RevocationReceiver(
    { serviceUrl: service.publicUrl, platformId: shop.platform_id, issuer, feedToken: await feedTokenOf(shop.platform_id), jwks, fetch, clockToleranceSeconds: 5 },
    { webSocket: false, warn: () => {} },
  );
}

describe('revocation on the embedded default', () => {
  it('a deactivated agent is refused by the platform, another agent is not', async () => {
    const gone = await grantedAgent('gone');
    const stays = await grantedAgent('stays');
    const t = await token(service.publicUrl, gone.api_key_id, gone.secret, shop.platform_id);
    const kept = await token(service.publicUrl, stays.api_key_id, stays.secret, shop.platform_id);
    expect((await call(platform.url, t)).status).toBe(200);
    await admin.patchAgent(gone.agent_id, { status: 'inactive' });
    expect(await msUntilRefused(platform.url, t, Date.now())).toBeLessThan(5000);
    expect((await call(platform.url, kept)).status).toBe(200);
    expect(platform.verifier.revocationStats()).toMatchObject({ connected: true, stale: false });
  });

  it('dropping a scope from the platform takes back the tokens of agents that held it, and only theirs', async () => {
    const catalogue = await admin.createPlatform({ name: 'Catalogue', scopes: [{ name: 'read' }, { name: 'write' }] });
    const site = await startPlatform({ serviceUrl: service.publicUrl, platformId: catalogue.platform_id, issuer, feedToken: await feedTokenOf(catalogue.platform_id) });
    try {
      const writer = await admin.createAgent('writer');
      const reader = await admin.createAgent('reader');
      await admin.grant(writer.agent_id, catalogue.platform_id, ['read', 'write']);
      await admin.grant(reader.agent_id, catalogue.platform_id, ['read']);
      const tw = await token(service.publicUrl, writer.api_key_id, writer.secret, catalogue.platform_id);
      const tr = await token(service.publicUrl, reader.api_key_id, reader.secret, catalogue.platform_id);
      await admin.patchPlatform(catalogue.platform_id, { scopes: [{ name: 'read' }] });
      expect(await msUntilRefused(site.url, tw, Date.now())).toBeLessThan(5000);
      expect((await call(site.url, tr)).status).toBe(200);
    } finally {
      await site.close();
    }
  });

  it('a platform learns nothing about agents that never had a grant on it', async () => {
    const elsewhere = await admin.createAgent('elsewhere');
    await admin.grant(elsewhere.agent_id, other.platform_id, ['read']);
    await admin.patchAgent(elsewhere.agent_id, { status: 'inactive' });
    const shopSets = Object.values(await pollSets(shop.platform_id)).map(payloadOf);
    const otherSets = Object.values(await pollSets(other.platform_id)).map(payloadOf);
    expect(JSON.stringify(shopSets)).not.toContain(elsewhere.agent_id);
    expect(otherSets.map((p) => p.sub_id)).toContainEqual({ format: 'iss_sub', iss: issuer, sub: elsewhere.agent_id });
  });
});

describe('feed SETs the middleware must not trust', () => {
  it('rejects a forged SET, a tampered one and one for another platform; a replayed SET changes nothing', async () => {
    const feed = await newFeed();
    try {
      await admin.patchAgent((await grantedAgent('later')).agent_id, { status: 'inactive' });
      const sets = await pollSets(shop.platform_id);
      const revocation = Object.entries(sets).find(([jti]) => !jti.endsWith(':head'))![1];
      await feed.applySet(revocation);
      await feed.applySet(revocation); // a replay: applying a revocation twice changes nothing

      // Forged: right kid and typ, wrong key.
      const { privateKey } = await generateKeyPair('RS256');
      const header = JSON.parse(Buffer.from(revocation.split('.')[0], 'base64url').toString());
      const forged = await new SignJWT({ ...payloadOf(revocation), jti: `${shop.platform_id}:999` }).setProtectedHeader(header).sign(privateKey);
      await expect(feed.applySet(forged)).rejects.toBeInstanceOf(DocumentRejectedError);

      // Tampered: a genuine signature over other content.
      const [h, , sig] = revocation.split('.');
      const altered = Buffer.from(JSON.stringify({ ...payloadOf(revocation), jti: `${shop.platform_id}:1000` })).toString('base64url');
      await expect(feed.applySet(`${h}.${altered}.${sig}`)).rejects.toBeInstanceOf(DocumentRejectedError);

      // Genuine, but for another platform.
      const misdirected = Object.values(await pollSets(other.platform_id))[0];
      await expect(feed.applySet(misdirected)).rejects.toBeInstanceOf(DocumentRejectedError);
      expect(feed.stats().documentsRejected).toBe(3);
    } finally {
      feed.close();
    }
  });

  it('(a) a socket that drops every revocation SET but passes the signed heads cannot keep a revoked token alive', async () => {
    // A proxy that passes everything but the revocation SETs. The signed head shows the gap,
    // and the middleware polls at once (polling is otherwise off here: every 60 s).
    const WebSocket = (await import('ws')).default;
    let dropped = 0;
    class DroppingProxy {
      onopen: ((event: unknown) => void) | null = null;
      onmessage: ((event: { data: unknown }) => void) | null = null;
      onclose: ((event: unknown) => void) | null = null;
      onerror: ((event: unknown) => void) | null = null;
      private readonly socket: InstanceType<typeof WebSocket>;
      constructor(url: string, protocols?: string | string[]) {
        this.socket = new WebSocket(url, protocols);
        this.socket.on('open', () => this.onopen?.({}));
        this.socket.on('close', () => this.onclose?.({}));
        this.socket.on('error', () => this.onerror?.({}));
        this.socket.on('message', (data: Buffer) => {
          const text = data.toString();
          if (!payloadOf(text).jti.endsWith(':head')) return void dropped++;
          this.onmessage?.({ data: text });
        });
      }
      close() {
        this.socket.close();
      }
    }
    const site = await startPlatform({ serviceUrl: service.publicUrl, platformId: shop.platform_id, issuer, feedToken: await feedTokenOf(shop.platform_id), feed: { webSocket: DroppingProxy as never, pollIntervalSeconds: 60 } });
    try {
      for (let i = 0; i < 100 && !site.verifier.revocationStats()!.connected; i++) await new Promise((r) => setTimeout(r, 50));
      const agent = await grantedAgent('dropped');
      const t = await token(service.publicUrl, agent.api_key_id, agent.secret, shop.platform_id);
      expect((await call(site.url, t)).status).toBe(200);
      await admin.patchAgent(agent.agent_id, { status: 'inactive' });
      expect(await msUntilRefused(site.url, t, Date.now())).toBeLessThan(1000);
      expect(dropped).toBeGreaterThan(0);
    } finally {
      await site.close();
    }
  });
});
