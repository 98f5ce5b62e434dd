// The signing thread's task, called in process: RS256 with node:crypto on a key imported once per thread,
// tokens of exactly the shape jose's CompactSign wrote (RSASSA-PKCS1-v1_5 is deterministic, so the
// bytes can be compared whole), answered as one transferable buffer.
import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CompactSign, importPKCS8, importSPKI, jwtVerify } from 'jose';
import { Piscina } from 'piscina';
import { signTokens } from '../../workers/crypto-worker.js';
import { NEED_KEY, packTokens, unpackTokens, type SignTask } from '../../workers/sign-protocol.js';

const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const spki = publicKey.export({ type: 'spki', format: 'pem' }).toString();

/** What the thread hands back: a value Piscina moves (transfer list), here taken out of its wrapper. */
function answer(batch: SignTask[]): { tokens: string[]; buffer: ArrayBuffer; transferred: unknown } {
  const moved = signTokens(batch) as Record<symbol, unknown>;
  const buffer = moved[Piscina.valueSymbol];
  expect(buffer).toBeInstanceOf(ArrayBuffer);
  return { tokens: unpackTokens(buffer as ArrayBuffer), buffer: buffer as ArrayBuffer, transferred: moved[Piscina.transferableSymbol] };
}

async function joseToken(kid: string, payload: string, typ = 'JWT'): Promise<string> {
  return new CompactSign(new TextEncoder().encode(payload)).setProtectedHeader({ alg: 'RS256', typ, kid }).sign(await importPKCS8(pem, 'RS256'));
}

describe('signTokens (the signing thread)', () => {
  const now = Math.floor(Date.now() / 1000);
  const payload = JSON.stringify({ iss: 'https://ace.test', sub: 'agent-1', aud: 'platform-1', iat: now, exp: now + 900, scope: 'orders:read', jti: 'j1', svc_token_profile: 'svc-native-jwt' });

  it('asks for the key once, then signs tokens byte-identical to what jose wrote, which jose verifies', async () => {
    expect(answer([{ kid: 'k-shape', payload }]).tokens).toEqual([NEED_KEY]);
    const first = answer([{ kid: 'k-shape', payload, privateKeyPem: pem }]);
    // Imported once: the PEM is not needed again on this thread.
    const again = answer([{ kid: 'k-shape', payload }, { kid: 'k-shape', payload, typ: 'at+jwt' }, { kid: 'k-other', payload }]);
    expect(again.tokens[2]).toBe(NEED_KEY);
    expect(first.tokens[0]).toBe(await joseToken('k-shape', payload));
    expect(again.tokens[0]).toBe(first.tokens[0]);
    expect(again.tokens[1]).toBe(await joseToken('k-shape', payload, 'at+jwt'));
    const [header] = first.tokens[0].split('.');
    expect(Buffer.from(header, 'base64url').toString()).toBe('{"alg":"RS256","typ":"JWT","kid":"k-shape"}');

    const verified = await jwtVerify(again.tokens[1], await importSPKI(spki, 'RS256'), { issuer: 'https://ace.test', audience: 'platform-1', typ: 'at+jwt' });
    expect(verified.protectedHeader).toEqual({ alg: 'RS256', typ: 'at+jwt', kid: 'k-shape' });
    expect(verified.payload).toEqual(JSON.parse(payload));
  });

  it('signs a payload with characters beyond ASCII as jose did (UTF-8, then base64url)', async () => {
    const text = JSON.stringify({ sub: 'agent-ü', note: '署名 ✓' });
    const { tokens } = answer([{ kid: 'k-utf8', payload: text, privateKeyPem: pem }]);
    expect(tokens[0]).toBe(await joseToken('k-utf8', text));
  });

  it('answers in one buffer that is handed over, not copied (it is its own transfer list)', () => {
    const { buffer, transferred } = answer([{ kid: 'k-move', payload, privateKeyPem: pem }]);
    // Piscina puts what the moved value names into the message's transfer list.
    expect(transferred).toBe(buffer);
  });

  it('refuses a key that is not RSA (the task fails: its request gets a 503, never a token of another alg)', () => {
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    expect(() => signTokens([{ kid: 'k-ec', payload, privateKeyPem: ec }])).toThrow(/not an RSA key/);
  });
});

describe('packTokens / unpackTokens', () => {
  it('round-trips a batch, empty entries (NEED_KEY) and an empty batch included', () => {
    for (const batch of [[], ['a.b.c'], ['x', NEED_KEY, 'eyJ.eyJ.sig', NEED_KEY], Array.from({ length: 40 }, (_, i) => 't'.repeat(i * 37))]) {
      expect(unpackTokens(packTokens(batch))).toEqual(batch);
    }
  });
});
