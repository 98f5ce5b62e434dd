#!/usr/bin/env node
// Writes the conformance vectors: jwks.json, tokens.json, sets.json (see README.md).
//
//   node conformance/generate.mjs
//
// Deterministic except for key generation: the RSA keys are generated once into conformance/keys/
// (TEST-ONLY private keys, never used anywhere else) and reused on every later run. RS256 signatures are
// deterministic (RSASSA-PKCS1-v1_5), so a rerun with the same keys writes byte-identical files. PS256 is
// randomised (its salt): the one PS256 vector keeps the signature of the previous run when its signing
// input is unchanged.
// Delete keys/ to start over with new keys (every token and SET changes then).
//
// Signing is done here with node:crypto, not with a JWT library: the vectors need headers a library
// refuses to produce (alg none, crit, HS256 keyed with the public key, missing typ or kid).
import { createHash, createHmac, createPrivateKey, createPublicKey, sign as rsaSign, constants } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { calculateJwkThumbprint, exportJWK, generateKeyPair } from 'jose';
// The feed's wire format from the protocol package, the one the service signs and the middleware checks
// (its compiled entry: run `npm run build` first).
import {
  EVENT_PLATFORM_TOKENS_REVOKED as PLATFORM_REVOKED,
  EVENT_SESSION_REVOKED as SESSION_REVOKED,
  EVENT_SIGNING_KEY_RETIRED as KEY_RETIRED,
  EVENT_STREAM_HEAD as STREAM_HEAD,
  SET_TYP,
  headJti,
  revocationJti,
} from '@agent-credential-exchange/protocol/feed-document';

const DIR = path.dirname(fileURLToPath(import.meta.url));
const KEYS = path.join(DIR, 'keys');

// The fixed world of the vectors. NOW is 2026-01-01T00:00:00Z; every verdict is computed against it.
const NOW = 1767225600;
const ISSUER = 'https://ace.example.test';
const PLATFORM = 'f3b7a2c4-5d6e-4f80-9a1b-2c3d4e5f6a7b';
const OTHER_PLATFORM = '0d1e2f30-4152-4637-8899-aabbccddeeff';
const AGENT = 'a9e8d7c6-b5a4-4392-8190-fedcba987654';
const OTHER_AGENT = 'b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e';
const CLIENT_ID = 'agnt_kid_0123456789abcdef0123456789abcdef';
const TOLERANCE = 5;
const MAX_TOKEN_AGE = 86400;
const TTL = 900;


// ---- keys ---------------------------------------------------------------------------------------------

/** One RSA key pair, generated on the first run and kept in keys/<name>.private.jwk.json. */
async function key(name, bits = 2048) {
  const file = path.join(KEYS, `${name}.private.jwk.json`);
  if (!existsSync(file)) {
    mkdirSync(KEYS, { recursive: true });
    const { privateKey } = await generateKeyPair('RS256', { extractable: true, modulusLength: bits });
    const jwk = await exportJWK(privateKey);
    writeFileSync(file, `${JSON.stringify({ ...jwk, comment: 'TEST-ONLY conformance key: never use it for anything else' }, null, 2)}\n`);
  }
  const stored = JSON.parse(readFileSync(file, 'utf8'));
  delete stored.comment;
  const publicJwk = { kty: 'RSA', n: stored.n, e: stored.e };
  const kid = await calculateJwkThumbprint(publicJwk);
  return {
    kid,
    privateKey: createPrivateKey({ key: stored, format: 'jwk' }),
    publicPem: createPublicKey({ key: publicJwk, format: 'jwk' }).export({ type: 'spki', format: 'pem' }),
    publicJwk,
  };
}

const active = await key('signing-1'); // the service's active key
const next = await key('signing-2'); // a second published signing key (the next key, or one retiring)
const encryption = await key('encryption'); // published with use "enc": never a signing key
const forger = await key('forger'); // never published: an attacker's key

const jwks = {
  keys: [
    { kty: 'RSA', use: 'sig', alg: 'RS256', kid: active.kid, n: active.publicJwk.n, e: active.publicJwk.e },
    { kty: 'RSA', use: 'sig', alg: 'RS256', kid: next.kid, n: next.publicJwk.n, e: next.publicJwk.e },
    { kty: 'RSA', use: 'enc', alg: 'RSA-OAEP-256', kid: encryption.kid, n: encryption.publicJwk.n, e: encryption.publicJwk.e },
  ],
};

// ---- compact JWS --------------------------------------------------------------------------------------

/** Tokens of the previous run, by signing input (for the randomised PS256 signature). */
const PREVIOUS = new Map();
if (existsSync(path.join(DIR, 'tokens.json'))) {
  for (const { token } of JSON.parse(readFileSync(path.join(DIR, 'tokens.json'), 'utf8')).vectors ?? []) {
    PREVIOUS.set(token.split('.').slice(0, 2).join('.'), token);
  }
}

const b64url = (data) => Buffer.from(data).toString('base64url');
const json = (value) => b64url(JSON.stringify(value));

/** Signs header.payload with the header's alg; `signWith` a key pair (RS256/PS256) or an HMAC secret. */
function jws(header, payload, signWith = active) {
  const input = `${typeof header === 'string' ? header : json(header)}.${typeof payload === 'string' ? payload : json(payload)}`;
  const alg = typeof header === 'string' ? 'RS256' : header.alg;
  let signature;
  if (alg === 'none') signature = '';
  else if (alg === 'HS256') signature = b64url(createHmac('sha256', signWith).update(input).digest());
  else if (alg === 'PS256') {
    const previous = PREVIOUS.get(input);
    if (previous) return previous;
    signature = b64url(rsaSign('sha256', Buffer.from(input), { key: signWith.privateKey, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 }));
  } else if (alg === 'RS512') signature = b64url(rsaSign('sha512', Buffer.from(input), signWith.privateKey));
  else signature = b64url(rsaSign('sha256', Buffer.from(input), signWith.privateKey));
  return `${input}.${signature}`;
}

// ---- access tokens ------------------------------------------------------------------------------------

const IAT = NOW - 60;

/** The claims the service puts in a token (docs/decisions.md, "The issued JWT"), issued a minute before NOW. */
function claims(overrides = {}, profile = 'svc-native-jwt') {
  const base = {
    iss: ISSUER,
    sub: AGENT,
    aud: PLATFORM,
    iat: IAT,
    nbf: IAT,
    exp: IAT + TTL,
    jti: `conformance-${createHash('sha256').update(JSON.stringify(overrides) + profile).digest('hex').slice(0, 16)}`,
    scope: 'orders:read orders:write',
    svc_token_profile: profile,
    client_id: CLIENT_ID,
  };
  const merged = { ...base, ...overrides };
  for (const [name, value] of Object.entries(merged)) if (value === undefined) delete merged[name];
  return merged;
}
const header = (overrides = {}) => {
  const merged = { alg: 'RS256', typ: 'JWT', kid: active.kid, ...overrides };
  for (const [name, value] of Object.entries(merged)) if (value === undefined) delete merged[name];
  return merged;
};

const READ = { method: 'GET', path: '/orders/42', scopes: ['orders:read'] };
const WRITE = { method: 'POST', path: '/orders', scopes: ['orders:write'] };
const ADMIN = { method: 'DELETE', path: '/orders/42', scopes: ['orders:admin'] };

const tokens = [];
function accept(name, description, token, route = READ) {
  const payload = JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());
  tokens.push({
    name,
    description,
    token,
    platform_id: PLATFORM,
    now: NOW,
    route,
    verdict: 'accept',
    status: 200,
    expect: { sub: payload.sub, scopes: String(payload.scope ?? '').split(' ').filter(Boolean) },
  });
}
function reject(name, description, token, reason, extra = {}, route = READ) {
  tokens.push({ name, description, token, platform_id: PLATFORM, now: NOW, route, verdict: 'reject', status: reason === 'insufficient_scope' ? 403 : 401, reason, ...extra });
}

// Accepted.
accept('valid-svc-native-jwt', 'A token as the service issues it: profile svc-native-jwt, typ JWT.', jws(header(), claims()));
accept('valid-oauth-at-jwt', 'Profile oauth-at-jwt (RFC 9068): typ at+jwt, the same claims.', jws(header({ typ: 'at+jwt' }), claims({}, 'oauth-at-jwt')));
accept(
  'valid-oauth-at-jwt-media-type',
  'typ is compared without the optional "application/" prefix and case-insensitively (RFC 7515 section 4.1.9).',
  jws(header({ typ: 'application/AT+JWT' }), claims({}, 'oauth-at-jwt')),
);
accept('valid-second-key', 'Signed with the second published key: pick the key by kid.', jws(header({ kid: next.kid }), claims(), next));
accept('valid-write-route', 'A route that needs orders:write, held by the token.', jws(header(), claims()), WRITE);
accept('valid-route-without-scope', 'A route whose rule needs no scope: any valid token of this platform.', jws(header(), claims({ scope: undefined })), { method: 'GET', path: '/health', scopes: [] });
accept('valid-exp-within-tolerance', `exp ${3} s before now: inside the ${TOLERANCE} s clock tolerance.`, jws(header(), claims({ iat: NOW - TTL - 3, nbf: NOW - TTL - 3, exp: NOW - 3 })));
accept('valid-nbf-within-tolerance', `nbf and iat ${3} s after now: inside the ${TOLERANCE} s clock tolerance.`, jws(header(), claims({ iat: NOW + 3, nbf: NOW + 3, exp: NOW + 3 + TTL })));
accept('valid-without-nbf', 'nbf is optional (the service sets it, a verifier does not require it).', jws(header(), claims({ nbf: undefined })));

// Signature and key.
{
  const good = jws(header(), claims());
  const [h, , s] = good.split('.');
  reject('bad-signature-tampered-payload', 'The payload was changed after signing (scope widened).', `${h}.${json(claims({ scope: 'orders:read orders:write orders:admin' }))}.${s}`, 'bad_signature');
}
reject('bad-signature-forged-with-known-kid', 'Signed by a key that is not published, naming a published kid.', jws(header(), claims(), forger), 'bad_signature');
reject('unknown-kid', 'Signed by an unpublished key under its own kid (after one JWKS refresh it is still unknown).', jws(header({ kid: forger.kid }), claims(), forger), 'unknown_kid');
reject('missing-kid', 'No kid: the service always names its key.', jws(header({ kid: undefined }), claims()), 'unknown_kid');
reject('kid-of-encryption-key', 'The kid of a published key whose use is "enc": only use "sig", alg RS256 keys verify tokens.', jws(header({ kid: encryption.kid }), claims(), encryption), 'unknown_kid');
reject('alg-none', 'alg "none" with an empty signature.', jws(header({ alg: 'none' }), claims()), 'alg_not_allowed');
reject('alg-hs256-keyed-with-public-key', 'HS256 whose HMAC key is the published RSA public key (PEM): the classic key confusion.', jws(header({ alg: 'HS256' }), claims(), active.publicPem), 'alg_not_allowed');
reject('alg-ps256', 'PS256 with the right key: only RS256 is accepted.', jws(header({ alg: 'PS256' }), claims()), 'alg_not_allowed');
reject('alg-rs512', 'RS512 with the right key: only RS256 is accepted.', jws(header({ alg: 'RS512' }), claims()), 'alg_not_allowed');
reject(
  'crit-unknown-extension',
  'A crit header naming an extension the verifier does not implement (RFC 7515 section 4.1.11).',
  jws(header({ crit: ['urn:example:must-understand'], 'urn:example:must-understand': true }), claims()),
  'crit_not_supported',
);
reject('malformed-two-segments', 'Not a compact JWS (two segments).', `${json(header())}.${json(claims())}`, 'malformed');
reject('malformed-payload-not-json', 'The signed payload is not JSON.', jws(header(), b64url('not json')), 'malformed');

// Audience and issuer.
reject('wrong-aud', 'A token for another platform.', jws(header(), claims({ aud: OTHER_PLATFORM })), 'wrong_aud');
reject('aud-array', 'aud as an array holding this platform: the service binds a token to one platform as a string.', jws(header(), claims({ aud: [PLATFORM] })), 'wrong_aud');
reject('aud-array-with-another', 'aud as an array of this platform and another.', jws(header(), claims({ aud: [PLATFORM, OTHER_PLATFORM] })), 'wrong_aud');
reject('wrong-iss', 'Another issuer.', jws(header(), claims({ iss: 'https://evil.example.test' })), 'wrong_iss');
reject('iss-trailing-slash', 'The issuer with a trailing slash: compared exactly.', jws(header(), claims({ iss: `${ISSUER}/` })), 'wrong_iss');

// Time.
reject('expired', 'exp a minute before now.', jws(header(), claims({ iat: NOW - TTL - 60, nbf: NOW - TTL - 60, exp: NOW - 60 })), 'expired');
reject('expired-just-past-tolerance', `exp ${TOLERANCE + 5} s before now.`, jws(header(), claims({ iat: NOW - TTL - 10, nbf: NOW - TTL - 10, exp: NOW - 10 })), 'expired');
reject(
  'iat-older-than-longest-lifetime',
  `iat more than ${MAX_TOKEN_AGE} s (the longest token lifetime the service can give) before now, exp still ahead.`,
  jws(header(), claims({ iat: NOW - MAX_TOKEN_AGE - 100, nbf: NOW - MAX_TOKEN_AGE - 100, exp: NOW + 60 })),
  'expired',
);
reject('nbf-in-the-future', 'nbf a minute after now (iat in the past).', jws(header(), claims({ nbf: NOW + 60 })), 'not_yet_valid');
reject('iat-in-the-future', 'iat a minute after now (nbf in the past).', jws(header(), claims({ iat: NOW + 60, nbf: NOW - 60 })), 'issued_in_future');

// Required claims, and their types.
for (const claim of ['iss', 'sub', 'aud', 'exp', 'iat']) {
  reject(`missing-${claim}`, `No ${claim} claim.`, jws(header(), claims({ [claim]: undefined })), 'missing_claim', { claim });
}
reject('exp-not-a-number', 'exp as a string.', jws(header(), claims({ exp: String(IAT + TTL) })), 'invalid_claim', { claim: 'exp' });
reject('sub-not-a-string', 'sub as a number.', jws(header(), claims({ sub: 42 })), 'invalid_claim', { claim: 'sub' });

// Profile and typ.
reject('missing-profile', 'No svc_token_profile claim.', jws(header(), claims({ svc_token_profile: undefined })), 'unknown_profile');
reject('unknown-profile', 'An svc_token_profile the service does not issue.', jws(header(), claims({ svc_token_profile: 'svc-other-jwt' })), 'unknown_profile');
reject('typ-at-jwt-for-svc-native-jwt', 'typ at+jwt on a token of profile svc-native-jwt.', jws(header({ typ: 'at+jwt' }), claims()), 'typ_mismatch');
reject('typ-jwt-for-oauth-at-jwt', 'typ JWT on a token of profile oauth-at-jwt.', jws(header(), claims({}, 'oauth-at-jwt')), 'typ_mismatch');
reject('missing-typ', 'No typ header.', jws(header({ typ: undefined }), claims()), 'typ_mismatch');
reject('typ-secevent-jwt', 'typ secevent+jwt (a revocation SET\'s type) on an access token.', jws(header({ typ: SET_TYP }), claims()), 'typ_mismatch');

// Scopes.
reject('scope-insufficient', 'The route needs orders:admin; the token holds orders:read orders:write.', jws(header(), claims()), 'insufficient_scope', { required_scopes: ['orders:admin'] }, ADMIN);
reject('scope-absent', 'No scope claim, on a route that needs orders:read.', jws(header(), claims({ scope: undefined })), 'insufficient_scope', { required_scopes: ['orders:read'] });
reject('scope-prefix-is-not-a-scope', 'scope "orders:readonly" does not hold orders:read (whole space-separated names).', jws(header(), claims({ scope: 'orders:readonly' })), 'insufficient_scope', { required_scopes: ['orders:read'] });

// ---- revocation SETs ----------------------------------------------------------------------------------

const setHeader = (overrides = {}) => header({ typ: SET_TYP, ...overrides });
const revocation = (seq, subId, events, overrides = {}) => ({
  iss: ISSUER,
  aud: PLATFORM,
  iat: NOW - 30,
  jti: revocationJti(PLATFORM, seq),
  sub_id: subId,
  events,
  ...overrides,
});
const agentSubject = (sub, iss = ISSUER) => ({ format: 'iss_sub', iss, sub });
const sessionRevoked = (iatMax = NOW - 30, expiresAt = NOW - 30 + TTL + 60) => ({ [SESSION_REVOKED]: { event_timestamp: NOW - 30, iat_max: iatMax, expires_at: expiresAt } });
/**
 * A stream head: `live` the ranges the transmitter still serves (default: every sequence 1..seq); null for a
 * head of a transmitter of an earlier release, which has no `live`.
 */
const head = (seq, iat = NOW - 1, live = seq > 0 ? [[1, seq]] : []) => ({
  iss: ISSUER,
  aud: PLATFORM,
  iat,
  jti: headJti(PLATFORM),
  sub_id: { format: 'opaque', id: PLATFORM },
  events: { [STREAM_HEAD]: live === null ? { seq } : { seq, live } },
});

/** options.key signs (default the active key); options.kid is the header's kid (default the active key's). */
const agentSet = (seq, sub, options = {}) =>
  jws(setHeader({ kid: options.kid ?? active.kid }), revocation(seq, agentSubject(sub), sessionRevoked(options.iatMax, options.expiresAt)), options.key ?? active);
const platformSet = (seq) =>
  jws(setHeader(), revocation(seq, { format: 'opaque', id: PLATFORM }, { [PLATFORM_REVOKED]: { event_timestamp: NOW - 30, iat_max: NOW - 30, expires_at: NOW - 30 + TTL + 60 } }));
const keySet = (seq, kid) => jws(setHeader(), revocation(seq, { format: 'opaque', id: kid }, { [KEY_RETIRED]: { event_timestamp: NOW - 30, expires_at: NOW - 30 + TTL + 60 } }));
const headSet = (seq, iat, live) => jws(setHeader(), head(seq, iat, live));

// Token checks after SETs are applied: the token is described by sub, iat and kid (signature and claims
// are assumed valid); "revoked" means the platform must refuse it, "accept" that the feed does not.
const check = (sub, iat, verdict, kid = active.kid) => ({ sub, iat, kid, verdict });
const BEFORE = NOW - 31; // issued before the revocations' iat_max (NOW - 30)
const AFTER = NOW - 29; // issued after it

const sets = [];
function setVector(name, description, set, verdict, details) {
  sets.push({ name, description, set, platform_id: PLATFORM, now: NOW, verdict, ...details });
}

setVector('session-revoked', 'CAEP session-revoked naming the agent (sub_id iss_sub): its tokens issued until iat_max are void.', agentSet(1, AGENT), 'accept', {
  effect: { event: 'session-revoked', sub: AGENT, iat_max: NOW - 30, expires_at: NOW - 30 + TTL + 60 },
  checks: [check(AGENT, BEFORE, 'revoked'), check(AGENT, NOW - 30, 'revoked'), check(AGENT, AFTER, 'accept'), check(OTHER_AGENT, BEFORE, 'accept')],
});
setVector('platform-tokens-revoked', 'Every token of the platform issued until iat_max is void (platform suspended).', platformSet(1), 'accept', {
  effect: { event: 'platform-tokens-revoked', iat_max: NOW - 30, expires_at: NOW - 30 + TTL + 60 },
  checks: [check(AGENT, BEFORE, 'revoked'), check(OTHER_AGENT, BEFORE, 'revoked'), check(AGENT, AFTER, 'accept')],
});
setVector('signing-key-retired', 'Every token signed with the retired kid (sub_id opaque) is void, whatever its iat.', keySet(1, next.kid), 'accept', {
  effect: { event: 'signing-key-retired', kid: next.kid, expires_at: NOW - 30 + TTL + 60 },
  checks: [check(AGENT, AFTER, 'revoked', next.kid), check(AGENT, AFTER, 'accept', active.kid)],
});
setVector('stream-head-current', 'The signed stream head at our sequence (0): the copy is current as of its iat.', headSet(0, NOW - 1), 'accept', {
  effect: { event: 'stream-head', seq: 0, fresh: true },
  checks: [],
});
setVector('stream-head-replayed-old', 'A stream head signed two minutes ago: valid, but it proves no freshness now.', headSet(0, NOW - 120), 'accept', {
  effect: { event: 'stream-head', seq: 0, fresh: false },
  checks: [],
});
setVector('stream-head-all-purged', 'A head at 3 whose live is empty: SETs 1-3 expired and were purged, so an empty copy holds all it must; current.', headSet(3, NOW - 1, []), 'accept', {
  effect: { event: 'stream-head', seq: 3, fresh: true },
  checks: [],
});
setVector('stream-head-ahead', 'A head at 2 whose live is [[1, 2]] on an empty copy: two live SETs are missing, so the copy is not current (poll at once).', headSet(2, NOW - 1), 'accept', {
  effect: { event: 'stream-head', seq: 2, fresh: false },
  checks: [],
});
setVector('stream-head-without-live', 'A head at 0 from a transmitter of an earlier release (no live): nothing to hold, current.', headSet(0, NOW - 1, null), 'accept', {
  effect: { event: 'stream-head', seq: 0, fresh: true },
  checks: [],
});
setVector('stream-head-without-live-ahead', 'A head at 2 without live (an earlier release) on an empty copy: it proves no purge, so the copy is not current.', headSet(2, NOW - 1, null), 'accept', {
  effect: { event: 'stream-head', seq: 2, fresh: false },
  checks: [],
});
setVector('session-revoked-expired-relevance', 'A valid session-revoked whose expires_at has passed: no token it could hit is still valid; it changes nothing.', agentSet(1, AGENT, { iatMax: NOW - 30, expiresAt: NOW - 60 }), 'accept', {
  effect: { event: 'session-revoked', sub: AGENT, iat_max: NOW - 30, expires_at: NOW - 60, expired: true },
  checks: [check(AGENT, BEFORE, 'accept')],
});
setVector('session-revoked-other-issuer-subject', 'session-revoked whose sub_id names another issuer\'s subject: not one of our agents, ignored.', jws(setHeader(), revocation(1, agentSubject(AGENT, 'https://elsewhere.example.test'), sessionRevoked())), 'accept', {
  effect: { event: 'ignored' },
  checks: [check(AGENT, BEFORE, 'accept')],
});
setVector('unknown-event-type', 'An event type the receiver does not know: ignored, as SSF asks.', jws(setHeader(), revocation(1, agentSubject(AGENT), { 'urn:example:secevent:something-else': { event_timestamp: NOW - 30, expires_at: NOW + 900 } })), 'accept', {
  effect: { event: 'ignored' },
  checks: [check(AGENT, BEFORE, 'accept')],
});

const rejectSet = (name, description, set, reason) => setVector(name, description, set, 'reject', { reason, checks: [check(AGENT, BEFORE, 'accept')] });
{
  const good = agentSet(1, AGENT);
  const [h, , s] = good.split('.');
  rejectSet('set-bad-signature', 'A session-revoked SET whose payload was changed after signing.', `${h}.${json(revocation(1, agentSubject(AGENT), sessionRevoked(NOW)))}.${s}`, 'bad_signature');
}
rejectSet('set-forged-with-known-kid', 'Signed by an unpublished key naming a published kid.', agentSet(1, AGENT, { key: forger }), 'bad_signature');
rejectSet('set-unknown-kid', 'Signed by an unpublished key under its own kid.', jws(setHeader({ kid: forger.kid }), revocation(1, agentSubject(AGENT), sessionRevoked()), forger), 'unknown_kid');
rejectSet('set-alg-none', 'alg none.', jws(setHeader({ alg: 'none' }), revocation(1, agentSubject(AGENT), sessionRevoked())), 'alg_not_allowed');
rejectSet('set-alg-hs256-keyed-with-public-key', 'HS256 keyed with the public key PEM.', jws(setHeader({ alg: 'HS256' }), revocation(1, agentSubject(AGENT), sessionRevoked()), active.publicPem), 'alg_not_allowed');
rejectSet('set-typ-jwt', 'typ JWT: a SET must be typ secevent+jwt (RFC 8417 section 2.3), so a token cannot pass as a SET.', jws(setHeader({ typ: 'JWT' }), revocation(1, agentSubject(AGENT), sessionRevoked())), 'wrong_typ');
rejectSet('set-missing-typ', 'No typ header.', jws(setHeader({ typ: undefined }), revocation(1, agentSubject(AGENT), sessionRevoked())), 'wrong_typ');
rejectSet('set-wrong-aud', 'A SET for another platform\'s stream.', jws(setHeader(), revocation(1, agentSubject(AGENT), sessionRevoked(), { aud: OTHER_PLATFORM })), 'wrong_aud');
rejectSet('set-wrong-iss', 'A SET from another issuer.', jws(setHeader(), revocation(1, agentSubject(AGENT, 'https://evil.example.test'), sessionRevoked(), { iss: 'https://evil.example.test' })), 'wrong_iss');
rejectSet('set-jti-of-another-stream', 'aud is this platform but the jti is another stream\'s (<other platform>:1).', jws(setHeader(), revocation(1, agentSubject(AGENT), sessionRevoked(), { jti: revocationJti(OTHER_PLATFORM, 1) })), 'wrong_jti');
rejectSet('set-without-events', 'No events claim.', jws(setHeader(), revocation(1, agentSubject(AGENT), undefined)), 'malformed');
rejectSet('set-without-iat', 'No iat claim.', jws(setHeader(), revocation(1, agentSubject(AGENT), sessionRevoked(), { iat: undefined })), 'malformed');
rejectSet('set-head-seq-not-integer', 'A stream head whose seq is a string.', jws(setHeader(), { ...head(0), events: { [STREAM_HEAD]: { seq: '0' } } }), 'malformed');
rejectSet('set-head-live-descending', 'A stream head whose live ranges are not ascending ([[3, 3], [1, 1]]): the whole head is refused.', headSet(3, NOW - 1, [[3, 3], [1, 1]]), 'malformed');
rejectSet('set-head-live-beyond-seq', 'A stream head at 3 whose live range reaches 4: the whole head is refused.', headSet(3, NOW - 1, [[1, 4]]), 'malformed');
rejectSet('set-head-live-not-pairs', 'A stream head whose live is a list of numbers, not [from, to] pairs.', headSet(3, NOW - 1, [1, 2, 3]), 'malformed');

// ---- poll exchanges (RFC 8936) ------------------------------------------------------------------------

const answer = (entries, moreAvailable = false) => ({ sets: Object.fromEntries(entries), moreAvailable });
const jti = (seq) => revocationJti(PLATFORM, seq);
const HEAD_JTI = headJti(PLATFORM);

const polls = [
  {
    name: 'poll-in-order',
    description: 'One answer: a session-revoked, a key retirement, then the head. Next poll acknowledges the highest sequence.',
    exchanges: [{ request: { ack: [] }, answer: answer([[jti(1), agentSet(1, AGENT)], [jti(2), keySet(2, next.kid)], [HEAD_JTI, headSet(2)]]) }],
    expect: {
      next_ack: [jti(2)],
      rejected: [],
      revoked_subjects: [AGENT],
      void_kids: [next.kid],
      fresh: true,
      checks: [check(AGENT, BEFORE, 'revoked'), check(OTHER_AGENT, BEFORE, 'accept'), check(OTHER_AGENT, AFTER, 'revoked', next.kid)],
    },
  },
  {
    name: 'poll-two-pages',
    description: 'moreAvailable: poll again at once, acknowledging the last sequence applied.',
    exchanges: [
      { request: { ack: [] }, answer: answer([[jti(1), agentSet(1, AGENT)]], true) },
      { request: { ack: [jti(1)] }, answer: answer([[jti(2), agentSet(2, OTHER_AGENT)], [HEAD_JTI, headSet(2)]]) },
    ],
    expect: {
      next_ack: [jti(2)],
      rejected: [],
      revoked_subjects: [AGENT, OTHER_AGENT],
      void_kids: [],
      fresh: true,
      checks: [check(AGENT, BEFORE, 'revoked'), check(OTHER_AGENT, BEFORE, 'revoked'), check(OTHER_AGENT, AFTER, 'accept')],
    },
  },
  {
    name: 'poll-out-of-order-and-replayed',
    description: 'SETs listed out of order, and one delivered again in the next answer: apply in sequence order; applying twice changes nothing.',
    exchanges: [
      { request: { ack: [] }, answer: answer([[jti(3), platformSet(3)], [jti(1), agentSet(1, AGENT)], [jti(2), agentSet(2, OTHER_AGENT)], [HEAD_JTI, headSet(3)]]) },
    ],
    then_poll_again: { request: { ack: [jti(3)] }, answer: answer([[jti(2), agentSet(2, OTHER_AGENT)], [HEAD_JTI, headSet(3)]]) },
    expect: {
      next_ack: [jti(3)],
      rejected: [],
      revoked_subjects: [AGENT, OTHER_AGENT],
      void_kids: [],
      fresh: true,
      checks: [check(AGENT, BEFORE, 'revoked'), check(OTHER_AGENT, BEFORE, 'revoked'), check(AGENT, AFTER, 'accept')],
    },
  },
  {
    name: 'poll-gap-closed-by-head',
    description: 'Only SET 5 and the head 5 whose live is [[5, 5]]: SETs 1-4 expired and were purged, the head says so, and the sequence moves to 5.',
    exchanges: [{ request: { ack: [] }, answer: answer([[jti(5), agentSet(5, AGENT)], [HEAD_JTI, headSet(5, NOW - 1, [[5, 5]])]]) }],
    expect: { next_ack: [jti(5)], rejected: [], revoked_subjects: [AGENT], void_kids: [], fresh: true, checks: [check(AGENT, BEFORE, 'revoked')] },
  },
  {
    name: 'poll-purged-between-live',
    description: 'SETs 1 and 3 and the head 3 whose live is [[1, 1], [3, 3]]: SET 2 was purged, so the copy holds everything live and is current at 3.',
    exchanges: [{ request: { ack: [] }, answer: answer([[jti(1), agentSet(1, AGENT)], [jti(3), agentSet(3, OTHER_AGENT)], [HEAD_JTI, headSet(3, NOW - 1, [[1, 1], [3, 3]])]]) }],
    expect: { next_ack: [jti(3)], rejected: [], revoked_subjects: [AGENT, OTHER_AGENT], void_kids: [], fresh: true, checks: [check(AGENT, BEFORE, 'revoked'), check(OTHER_AGENT, BEFORE, 'revoked')] },
  },
  {
    name: 'poll-stripped-answer',
    description:
      'A proxy stripped SET 2 (which revokes the other agent) from the answer and from the next one, passing the heads: the head 2 lists 2 as live, so ' +
      'the copy stays at 1 and is NOT current (a token SET 2 revokes must not be accepted as current: failMode applies), and it polls again at once.',
    exchanges: [{ request: { ack: [] }, answer: answer([[jti(1), agentSet(1, AGENT)], [HEAD_JTI, headSet(2)]]) }],
    then_poll_again: { request: { ack: [jti(1)] }, answer: answer([[HEAD_JTI, headSet(2)]]) },
    expect: { next_ack: [jti(1)], rejected: [], revoked_subjects: [AGENT], void_kids: [], fresh: false, checks: [check(AGENT, BEFORE, 'revoked')] },
  },
  {
    name: 'poll-stripped-then-whole',
    description: 'SET 2 stripped from the first answer (not current, poll again at once); the next answer carries it: the copy is current at 2 and the other agent revoked.',
    exchanges: [{ request: { ack: [] }, answer: answer([[jti(1), agentSet(1, AGENT)], [HEAD_JTI, headSet(2)]]) }],
    then_poll_again: { request: { ack: [jti(1)] }, answer: answer([[jti(2), agentSet(2, OTHER_AGENT)], [HEAD_JTI, headSet(2)]]) },
    expect: {
      next_ack: [jti(2)],
      rejected: [],
      revoked_subjects: [AGENT, OTHER_AGENT],
      void_kids: [],
      fresh: true,
      checks: [check(AGENT, BEFORE, 'revoked'), check(OTHER_AGENT, BEFORE, 'revoked')],
    },
  },
  {
    name: 'poll-head-without-live',
    description:
      'SETs 1 and 3 and a head 3 without live (a transmitter of an earlier release): 2 may have been dropped or purged, the head cannot say, so the ' +
      'copy stays at 1 and is not current (the mixed-version policy: the safe side).',
    exchanges: [{ request: { ack: [] }, answer: answer([[jti(1), agentSet(1, AGENT)], [jti(3), agentSet(3, OTHER_AGENT)], [HEAD_JTI, headSet(3, NOW - 1, null)]]) }],
    expect: { next_ack: [jti(1)], rejected: [], revoked_subjects: [AGENT, OTHER_AGENT], void_kids: [], fresh: false, checks: [check(AGENT, BEFORE, 'revoked'), check(OTHER_AGENT, BEFORE, 'revoked')] },
  },
  {
    name: 'poll-with-forged-set',
    description: 'A forged SET in an answer is rejected; the rest of the answer still applies. Live SET 2 is not held, so the copy stays at 1, not current.',
    exchanges: [{ request: { ack: [] }, answer: answer([[jti(1), agentSet(1, AGENT)], [jti(2), agentSet(2, OTHER_AGENT, { key: forger })], [HEAD_JTI, headSet(2)]]) }],
    expect: {
      next_ack: [jti(1)],
      rejected: [jti(2)],
      revoked_subjects: [AGENT],
      void_kids: [],
      fresh: false,
      checks: [check(AGENT, BEFORE, 'revoked'), check(OTHER_AGENT, BEFORE, 'accept')],
    },
  },
  {
    name: 'poll-retired-key-signs-no-more',
    description: 'SET 1 retires a key; SET 2 is signed with that key: it is refused even though the key is still in the JWKS (and, live but not held, leaves the copy at 1, not current).',
    exchanges: [{ request: { ack: [] }, answer: answer([[jti(1), keySet(1, next.kid)], [jti(2), agentSet(2, OTHER_AGENT, { key: next, kid: next.kid })], [HEAD_JTI, headSet(2)]]) }],
    expect: {
      next_ack: [jti(1)],
      rejected: [jti(2)],
      revoked_subjects: [],
      void_kids: [next.kid],
      fresh: false,
      checks: [check(OTHER_AGENT, BEFORE, 'accept'), check(AGENT, BEFORE, 'revoked', next.kid)],
    },
  },
  {
    name: 'poll-unknown-event-acknowledged',
    description: 'SET 1 holds only an unknown event type: ignored, but acknowledged like any other. This answer has no head, so the copy is not proven current.',
    exchanges: [
      {
        request: { ack: [] },
        answer: answer([
          [jti(1), jws(setHeader(), revocation(1, agentSubject(AGENT), { 'urn:example:secevent:something-else': { event_timestamp: NOW - 30, expires_at: NOW + 900 } }))],
          [jti(2), agentSet(2, OTHER_AGENT)],
        ]),
      },
    ],
    expect: { next_ack: [jti(2)], rejected: [], revoked_subjects: [OTHER_AGENT], void_kids: [], fresh: false, checks: [check(AGENT, BEFORE, 'accept'), check(OTHER_AGENT, BEFORE, 'revoked')] },
  },
];

// ---- files --------------------------------------------------------------------------------------------

const common = {
  issuer: ISSUER,
  platform_id: PLATFORM,
  now: NOW,
  now_iso: new Date(NOW * 1000).toISOString(),
  clock_tolerance_seconds: TOLERANCE,
  max_token_age_seconds: MAX_TOKEN_AGE,
  jwks: 'jwks.json',
};
const write = (name, value) => writeFileSync(path.join(DIR, name), `${JSON.stringify(value, null, 2)}\n`);
write('jwks.json', jwks);
write('tokens.json', { ...common, vectors: tokens });
write('sets.json', { ...common, sets, polls });
console.log(`conformance: ${tokens.length} token vectors, ${sets.length} SET vectors, ${polls.length} poll exchanges (keys ${active.kid.slice(0, 8)}…, ${next.kid.slice(0, 8)}…)`);
