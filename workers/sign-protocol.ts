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
