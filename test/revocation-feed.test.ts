// The revocation feed on the embedded default (one process, no Redis), and the middleware's refusal of
// forged, tampered, misdirected and replayed older feed documents.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeyPair, SignJWT } from 'jose';
import { startService, type ServiceHandle } from './support/service.js';
import { AdminClient, type PlatformRecord } from '../kit/admin.js';
import { call, msUntilRefused, startPlatform, token, type Platform } from './support/revocation.js';
import { JwksCache } from '../packages/middleware/src/jwks-cache.js';
import { DocumentRejectedError, RevocationFeed } from '../packages/middleware/src/revocation-feed.js';

let service: ServiceHandle;
let admin: AdminClient;
let shop: PlatformRecord;
let other: PlatformRecord;
let platform: Platform;
let issuer: string;

beforeAll(async () => {
  service = await startService({ mode: 'embedded' });
  issuer = service.publicUrl;
  admin = new AdminClient(service);
  shop = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'read' }] });
  other = await admin.createPlatform({ name: 'Other', scopes: [{ name: 'read' }] });
  platform = await startPlatform({ serviceUrl: service.publicUrl, platformId: shop.platform_id, issuer });
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

const feedUrl = (platformId: string, since = 0) => `${service.publicUrl}/api/v1/platforms/${platformId}/revocations?since=${since}`;
const payloadOf = (jws: string) => JSON.parse(Buffer.from(jws.split('.')[1], 'base64url').toString());

function newFeed() {
  const jwks = new JwksCache({ url: `${service.publicUrl}/.well-known/jwks.json`, fetch, cooldownMs: 0, defaultMaxAgeMs: 60_000, maxMaxAgeMs: 60_000, timeoutMs: 5000 });
  return new RevocationFeed(
    { serviceUrl: service.publicUrl, platformId: shop.platform_id, issuer, jwks, fetch, clockToleranceSeconds: 5 },
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
    const site = await startPlatform({ serviceUrl: service.publicUrl, platformId: catalogue.platform_id, issuer });
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
    const shopDoc = payloadOf(await (await fetch(feedUrl(shop.platform_id))).text());
    const otherDoc = payloadOf(await (await fetch(feedUrl(other.platform_id))).text());
    expect(JSON.stringify(shopDoc)).not.toContain(elsewhere.agent_id);
    expect(JSON.stringify(otherDoc)).toContain(elsewhere.agent_id);
  });
});

describe('feed documents the middleware must not trust', () => {
  it('rejects a replayed older document, a forged one, a tampered one and one for another platform', async () => {
    const feed = newFeed();
    try {
      const first = await (await fetch(feedUrl(shop.platform_id))).text();
      await feed.applyDocument(first);
      const seq = payloadOf(first).seq;
      expect(feed.stats().seq).toBe(seq);

      await admin.patchAgent((await grantedAgent('later')).agent_id, { status: 'inactive' });
      const second = await (await fetch(feedUrl(shop.platform_id))).text();
      expect(payloadOf(second).seq).toBeGreaterThan(seq);
      await feed.applyDocument(second);

      // Replay of the older document (valid signature, lower sequence): refused.
      await expect(feed.applyDocument(first)).rejects.toBeInstanceOf(DocumentRejectedError);

      // Forged: right kid and typ, wrong key.
      const { privateKey } = await generateKeyPair('RS256');
      const header = JSON.parse(Buffer.from(second.split('.')[0], 'base64url').toString());
      const forged = await new SignJWT({ ...payloadOf(second), seq: payloadOf(second).seq + 100, entries: [] })
        .setProtectedHeader(header)
        .sign(privateKey);
      await expect(feed.applyDocument(forged)).rejects.toBeInstanceOf(DocumentRejectedError);

      // Tampered: a genuine signature over other content.
      const [h, , s] = second.split('.');
      const altered = Buffer.from(JSON.stringify({ ...payloadOf(second), seq: 10_000, entries: [] })).toString('base64url');
      await expect(feed.applyDocument(`${h}.${altered}.${s}`)).rejects.toBeInstanceOf(DocumentRejectedError);

      // Genuine, but for another platform.
      const misdirected = await (await fetch(feedUrl(other.platform_id))).text();
      await expect(feed.applyDocument(misdirected)).rejects.toBeInstanceOf(DocumentRejectedError);

      expect(feed.stats()).toMatchObject({ seq: payloadOf(second).seq, documentsRejected: 4 });
    } finally {
      feed.close();
    }
  });

  it('a middleware fed forged documents by a man in the middle still refuses revoked tokens', async () => {
    // The platform polls through a "cache" that answers the feed with a forged, empty, far-ahead document.
    const { privateKey } = await generateKeyPair('RS256');
    const activeKid = JSON.parse(Buffer.from((await (await fetch(feedUrl(shop.platform_id))).text()).split('.')[0], 'base64url').toString()).kid;
    const forged = await new SignJWT({ iss: issuer, platform_id: shop.platform_id, since: 0, seq: 1_000_000, iat: Math.floor(Date.now() / 1000), entries: [] })
      .setProtectedHeader({ alg: 'RS256', kid: activeKid, typ: 'ace-revocations+jwt' })
      .sign(privateKey);
    let forgedServed = 0;
    const hostile: typeof fetch = async (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      if (url.includes('/revocations') && forgedServed < 3) {
        forgedServed++;
        return new Response(forged, { status: 200, headers: { 'content-type': 'application/jwt' } });
      }
      return fetch(input, init);
    };
    const { createVerifier } = await import('../packages/middleware/src/index.js');
    const yaml = await (await fetch(`${service.publicUrl}/api/v1/platforms/${shop.platform_id}/scopes.yaml`)).text();
    const verifier = createVerifier({ serviceUrl: service.publicUrl, issuer, scopesYaml: yaml, unmatchedRoutes: 'authenticate', fetch: hostile, revocationFeed: { webSocket: false, pollIntervalSeconds: 0.2, warn: () => {} } });
    try {
      await expect(verifier.ready()).rejects.toBeInstanceOf(DocumentRejectedError);
      const agent = await grantedAgent('mitm');
      const t = await token(service.publicUrl, agent.api_key_id, agent.secret, shop.platform_id);
      await admin.patchAgent(agent.agent_id, { status: 'inactive' });
      // Once the genuine document gets through, the forged sequence has not poisoned the resume point.
      const deadline = Date.now() + 10_000;
      let result = await verifier.authorize({ method: 'GET', path: '/x', authorization: `Bearer ${t}` });
      while (result.ok && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        result = await verifier.authorize({ method: 'GET', path: '/x', authorization: `Bearer ${t}` });
      }
      expect(result.ok).toBe(false);
      expect(!result.ok && result.wwwAuthenticate).toContain('error="invalid_token"');
      expect(verifier.revocationStats()!.documentsRejected).toBeGreaterThanOrEqual(1);
    } finally {
      verifier.close();
    }
  });
});
