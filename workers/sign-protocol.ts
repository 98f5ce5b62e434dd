// The signing task's protocol, shared by the signing thread and its caller (the sign batcher) without
// the caller loading the worker module (which would load argon2 too).

export interface SignTask {
  kid: string;
  /** PKCS#8 PEM of the private key: sent only when this thread answered NEED_KEY for the kid. */
  privateKeyPem?: string;
  /** The JWT payload, already serialised by the caller. */
  payload: string;
  /** The JWS `typ` header; absent means `JWT` (svc-native-jwt), `at+jwt` for RFC 9068 (oauth-at-jwt), `secevent+jwt` for a SET. */
  typ?: 'at+jwt' | 'secevent+jwt';
}

/** Answer of signToken when this thread does not hold the key yet: resend the task with the PEM. */
export const NEED_KEY = '';

/**
 * A batch's answers in one ArrayBuffer, so the thread hands it over (transfer list) instead of the
 * structured clone copying each string: [count, end offset of each token (u32)], then the tokens' bytes
 * (compact JWS: ASCII). NEED_KEY is an empty token.
 */
export function packTokens(tokens: readonly string[]): ArrayBuffer {
  const head = 4 * (tokens.length + 1);
  let size = head;
  for (const token of tokens) size += token.length;
  const buffer = new ArrayBuffer(size);
  const ends = new Uint32Array(buffer, 0, tokens.length + 1);
  const bytes = Buffer.from(buffer);
  ends[0] = tokens.length;
  let at = head;
  for (let i = 0; i < tokens.length; i++) {
    at += bytes.write(tokens[i], at, 'latin1');
    ends[i + 1] = at;
  }
  return buffer;
}

export function unpackTokens(buffer: ArrayBuffer): string[] {
  const count = new Uint32Array(buffer, 0, 1)[0];
  const ends = new Uint32Array(buffer, 0, count + 1);
  const bytes = Buffer.from(buffer);
  const tokens = new Array<string>(count);
  let at = 4 * (count + 1);
  for (let i = 0; i < count; i++) {
    tokens[i] = bytes.toString('latin1', at, ends[i + 1]);
    at = ends[i + 1];
  }
  return tokens;
}
