// The conformance vectors (conformance/: tokens, revocation SETs and RFC 8936 poll exchanges, each with the
// verdict a platform must reach) run against the middleware itself, in process: no service. A fetch stand-in
// serves the vectors' JWKS and the poll answers, the verifier and the feed read the vectors' fixed clock
// (option `now`). Every vector asserts its verdict and its reason, so a check the middleware stopped making
// turns its vectors red. Regenerate the vectors with `node conformance/generate.mjs`.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createVerifier } from '../../packages/middleware/src/verifier.js';
import { createVerifier as createNodeVerifier } from '../../packages/middleware/src/node.js';
import { JwksCache } from '../../packages/middleware/src/jwks-cache.js';
import { RevocationReceiver } from '../../packages/middleware/src/revocation-feed.js';
import { RouteTable } from '../../packages/middleware/src/scope-map.js';

const DIR = new URL('../../conformance/', import.meta.url);
const read = (name: string) => JSON.parse(readFileSync(new URL(name, DIR), 'utf8'));
const jwks = read('jwks.json');
const tokens = read('tokens.json');
const sets = read('sets.json');

interface Route {
  method: string;
  path: string;
  scopes: string[];
}
interface Check {
  sub: string;
  iat: number;
  kid: string;
  verdict: 'accept' | 'revoked';
}

/** Serves the vectors' JWKS, and the poll answers of `exchanges` in order (recording each poll's body). */
function standIn(exchanges: { answer: unknown }[] = []) {
  const polls: { ack: unknown }[] = [];
  const fetchStub: typeof fetch = async (input, init) => {
    const url = String(input);
    if (url.endsWith('/.well-known/jwks.json')) return Response.json(jwks, { headers: { 'cache-control': 'max-age=300' } });
    if (url.endsWith('/revocations') && init?.method === 'POST') {
      const body = JSON.parse(String(init.body));
      polls.push({ ack: body.ack });
      const exchange = exchanges[polls.length - 1];
      if (!exchange) return Response.json({ error: 'no more answers in this vector' }, { status: 500 });
      return Response.json(exchange.answer);
    }
    return new Response('not found', { status: 404 });
  };
  return { fetchStub, polls };
}

// The middleware's refusal text for each reason code of the vectors (error_description of its 401/403).
const TOKEN_REASONS: Record<string, RegExp> = {
  bad_signature: /^The access token signature is invalid\.$/,
  unknown_kid: /^The access token is signed with an unknown key\.$/,
  alg_not_allowed: /^The access token uses an algorithm that is not accepted\.$/,
  crit_not_supported: /critical header parameter \(crit\)/,
  malformed: /^The access token is malformed\.$/,
  wrong_aud: /^The access token (is meant for another platform|has an unexpected audience)\.$/,
  wrong_iss: /^The access token has an unexpected issuer\.$/,
  expired: /^The access token expired\.$/,
  not_yet_valid: /^The access token is not valid yet\.$/,
  issued_in_future: /^The access token is issued in the future\.$/,
  missing_claim: /^The access token lacks the (\S+) claim\.$/,
  invalid_claim: /^The access token has an invalid (\S+) claim\.$/,
  unknown_profile: /^The access token has an unknown profile\.$/,
  typ_mismatch: /^The access token has a type \(typ\) that does not match its profile\.$/,
  insufficient_scope: /^This route needs the scope /,
};

// The feed's warning for each reason a SET is rejected ("revocation feed SET rejected (<reason>)").
const SET_REASONS: Record<string, RegExp> = {
  bad_signature: /signature verification failed/,
  unknown_kid: /unknown signing key/,
  alg_not_allowed: /"alg" \(Algorithm\) Header Parameter value not allowed/,
  wrong_typ: /unexpected "typ" JWT header value/,
  wrong_aud: /unexpected "aud" claim value/,
  wrong_iss: /unexpected "iss" claim value/,
  wrong_jti: /jti is not one of this stream/,
  malformed: /\(malformed( head)?\)$/,
  void_key: /signed with a void key/,
};

// Both entries: the runtime-neutral one checks signatures with WebCrypto, the Node one with node:crypto.
const ENTRIES = { edge: createVerifier, node: createNodeVerifier } as const;

function verifierFor(vector: { platform_id: string; now: number; route: Route }, entry: keyof typeof ENTRIES = 'edge') {
  const { fetchStub } = standIn();
  return ENTRIES[entry]({
    serviceUrl: 'https://ace.example.test',
    issuer: tokens.issuer,
    scopesDocument: {
      schema: 'SvcScopesYaml',
      version: 1,
      platform_id: vector.platform_id,
      scopes: [...new Set(['orders:read', 'orders:write', ...vector.route.scopes])].map((name) => ({ name, description: name })),
      routes: [vector.route],
    },
    fetch: fetchStub,
    now: () => vector.now * 1000,
    clockToleranceSeconds: tokens.clock_tolerance_seconds,
    jwksCooldownSeconds: 0,
    revocationFeed: false,
  });
}

describe('conformance vectors: tokens (conformance/tokens.json)', () => {
  it('has vectors for every reason code, and the generator keeps the fixed clock', () => {
    const reasons = new Set(tokens.vectors.map((v: { reason?: string }) => v.reason).filter(Boolean));
    expect([...reasons].sort()).toEqual(Object.keys(TOKEN_REASONS).sort());
    expect(tokens.vectors.filter((v: { verdict: string }) => v.verdict === 'accept').length).toBeGreaterThanOrEqual(5);
    for (const v of tokens.vectors) expect(v.now).toBe(tokens.now);
  });

  for (const [entry, vector] of (['edge', 'node'] as const).flatMap((e) => tokens.vectors.map((v: typeof tokens.vectors[number]) => [e, v] as const))) {
    it(`${entry}: ${vector.name}: ${vector.verdict}${vector.reason ? ` (${vector.reason})` : ''}`, async () => {
      const verifier = verifierFor(vector, entry);
      try {
        const result = await verifier.authorize({ method: vector.route.method, path: vector.route.path, authorization: `Bearer ${vector.token}` });
        if (vector.verdict === 'accept') {
          expect(result, JSON.stringify(result)).toMatchObject({ ok: true });
          if (!result.ok) return;
          expect(result.claims.agentId).toBe(vector.expect.sub);
          expect(result.claims.scopes).toEqual(vector.expect.scopes);
          return;
        }
        expect(result.ok).toBe(false);
        if (result.ok) return;
        expect(result.status).toBe(vector.status);
        const description = JSON.parse(result.body).detail as string;
        const match = TOKEN_REASONS[vector.reason].exec(description);
        expect(match, `${vector.reason}: got "${description}"`).not.toBeNull();
        if (vector.claim) expect(match![1]).toBe(vector.claim);
      } finally {
        verifier.close();
      }
    });
  }

  it('the fixed clock is what decides: the valid token is refused at the real clock of 2027', async () => {
    const valid = tokens.vectors.find((v: { name: string }) => v.name === 'valid-svc-native-jwt');
    const verifier = verifierFor({ ...valid, now: Date.UTC(2027, 0, 1) / 1000 });
    const result = await verifier.authorize({ method: 'GET', path: valid.route.path, authorization: `Bearer ${valid.token}` });
    verifier.close();
    expect(result).toMatchObject({ ok: false, status: 401 });
  });
});

/** A fresh feed at the vectors' clock, its warnings collected. */
function feedFor(exchanges: { answer: unknown }[] = []) {
  const { fetchStub, polls } = standIn(exchanges);
  const warnings: string[] = [];
  const jwksCache = new JwksCache({ url: 'https://ace.example.test/.well-known/jwks.json', fetch: fetchStub, cooldownMs: 0, defaultMaxAgeMs: 60_000, maxMaxAgeMs: 60_000, timeoutMs: 1000 });
  const feed = new RevocationReceiver(
    { serviceUrl: 'https://ace.example.test', platformId: sets.platform_id, issuer: sets.issuer, feedToken: 'acef_conformance', jwks: jwksCache, fetch: fetchStub, clockToleranceSeconds: sets.clock_tolerance_seconds, now: () => sets.now * 1000 },
    { webSocket: false, staleAfterSeconds: 15, warn: (message) => warnings.push(message) },
  );
  return { feed, polls, warnings, close: () => (feed.close(), jwksCache.close()) };
}

/** Waits until the receiver has no poll in flight or queued (its own gap poll included). */
async function pollsSettled(feed: RevocationReceiver): Promise<void> {
  // The receiver's poll half (packages/middleware/src/feed-poll.ts) holds the poll that runs.
  const internals = feed as unknown as { poller: { fetching?: Promise<void> } };
  // A poll that fails (the stand-in has no answer left) is counted in stats(); the vector checks the state.
  while (internals.poller.fetching) await internals.poller.fetching.catch(() => undefined);
}

function verdictOf(feed: RevocationReceiver, check: Check): 'accept' | 'revoked' {
  if (feed.isVoidKey(check.kid)) return 'revoked';
  return feed.check({ sub: check.sub, iat: check.iat }) === 'revoked' ? 'revoked' : 'accept';
}

describe('conformance vectors: revocation SETs (conformance/sets.json)', () => {
  it('has vectors for every SET reason code but void_key (which needs a stream: see the polls)', () => {
    const reasons = new Set(sets.sets.map((v: { reason?: string }) => v.reason).filter(Boolean));
    expect([...reasons, 'void_key'].sort()).toEqual(Object.keys(SET_REASONS).sort());
  });

  for (const vector of sets.sets) {
    it(`${vector.name}: ${vector.verdict}${vector.reason ? ` (${vector.reason})` : ''}`, async () => {
      const { feed, warnings, close } = feedFor();
      try {
        if (vector.verdict === 'reject') {
          await expect(feed.applySet(vector.set)).rejects.toMatchObject({ code: 'ERR_ACE_FEED_DOCUMENT_REJECTED' });
          expect(warnings.join('\n')).toMatch(SET_REASONS[vector.reason]);
          expect(feed.stats().documentsRejected).toBe(1);
        } else {
          await feed.applySet(vector.set);
          expect(warnings).toEqual([]);
          if (vector.effect.event === 'stream-head') expect(feed.stats().stale).toBe(!vector.effect.fresh);
          else expect(feed.stats().documentsRejected).toBe(0);
        }
        for (const check of vector.checks as Check[]) expect(verdictOf(feed, check), JSON.stringify(check)).toBe(check.verdict);
      } finally {
        close();
      }
    });
  }
});

describe('conformance vectors: RFC 8936 poll exchanges (conformance/sets.json polls)', () => {
  for (const vector of sets.polls) {
    it(`${vector.name}`, async () => {
      const exchanges = [...vector.exchanges, ...(vector.then_poll_again ? [vector.then_poll_again] : [])];
      const { feed, polls, warnings, close } = feedFor(exchanges);
      try {
        await feed.sync();
        // A gap (a head listing a live SET the answer lacked) makes the receiver poll again at once, by itself.
        const gap = feed.stats().gap;
        if (vector.then_poll_again && !gap) {
          // The next poll, as the feed's timer would start it (called directly: no waiting on a timer).
          await (feed as unknown as { pollNow(): Promise<void> }).pollNow();
        }
        await pollsSettled(feed);
        expect(polls.slice(0, vector.exchanges.length).map((p) => p.ack)).toEqual(vector.exchanges.map((e: { request: { ack: unknown } }) => e.request.ack));
        if (vector.then_poll_again) expect(polls[vector.exchanges.length]?.ack).toEqual(vector.then_poll_again.request.ack);
        if (gap) {
          // Exactly one poll at once, acknowledging what the copy holds (later ones are spaced a second apart).
          expect(polls).toHaveLength(vector.exchanges.length + 1);
          expect(polls.at(-1)!.ack).toEqual(vector.then_poll_again?.request.ack ?? vector.expect.next_ack);
        }
        expect(feed.stats().seq).toBe(Number(vector.expect.next_ack[0].split(':').pop()));
        expect(feed.stats().stale).toBe(!vector.expect.fresh);
        expect(feed.stats().documentsRejected).toBe(vector.expect.rejected.length);
        // A gap is warned about (a proxy may be dropping SETs); nothing else is, unless a SET was rejected.
        const gapWarnings = warnings.filter((w) => /signed head lists SETs the poll answer did not carry/.test(w));
        if (feed.stats().gap) expect(gapWarnings).not.toHaveLength(0);
        if (vector.expect.rejected.length === 0) expect(warnings.filter((w) => !gapWarnings.includes(w))).toEqual([]);
        for (const check of vector.expect.checks as Check[]) expect(verdictOf(feed, check), JSON.stringify(check)).toBe(check.verdict);
      } finally {
        close();
      }
    });
  }
});

describe('conformance vectors: which rule a path reaches (conformance/paths.json)', () => {
  const paths = read('paths.json') as {
    vectors: { name: string; routes: { method: 'GET'; path: string; scopes: string[] }[]; requests: { method: string; path: string; rule: string | null }[] }[];
  };
  for (const vector of paths.vectors) {
    it(`${vector.name}: literal segments first, equal ranks refused`, () => {
      const table = new RouteTable(vector.routes);
      const got = vector.requests.map(({ method, path }) => {
        const resolution = table.resolvePath(method, path);
        return { method, path, rule: resolution.kind === 'rule' ? resolution.rule.path : null };
      });
      expect(got).toEqual(vector.requests);
    });
  }
});
