// A workload issuer's keys may be registered as a SPIFFE trust bundle as SPIRE publishes it (SPIFFE Trust
// Domain and Bundle spec §4): a JWK Set whose keys say what they verify, `use: "jwt-svid"` (JWT-SVIDs: what
// we verify) or `use: "x509-svid"` (X.509-SVIDs: certificates, no kid, nothing to do with tokens), beside
// `spiffe_sequence` and `spiffe_refresh_hint`. What is kept: the keys for JWTs, each with its own kid (SPIRE's
// JWT-SVIDs name it), marked `use: "sig"`, the RFC 7517 value every JOSE library matches.
import type { PublicJwk } from '../ports/client-keys.js';
import { ServiceError } from '../errors.js';

const X509_SVID = 'x509-svid';
const JWT_SVID = 'jwt-svid';

/** The keys of a JWK Set or SPIFFE bundle that verify JWTs, as the verifier takes them. */
export function jwtVerificationKeys(keys: readonly Record<string, unknown>[]): PublicJwk[] {
  const forTokens = keys.filter((key) => key.use !== X509_SVID);
  if (forTokens.length === 0 && keys.length > 0) {
    throw new ServiceError('validation_error', 'jwks holds no key for JWTs: x509-svid keys verify X.509-SVIDs; a SPIFFE bundle for JWT-SVIDs has keys with use "jwt-svid".');
  }
  return forTokens.map((key) => (key.use === JWT_SVID ? { ...key, use: 'sig' } : key) as PublicJwk);
}
