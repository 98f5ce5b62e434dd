// The Node side of the verifier: reads the scope file from disk (`scopesFile`), checks RS256 signatures
// and hashes tokens for the verified-token cache with node:crypto and, where Node has no global WebSocket (Node 20), follows the
// revocation feed with the `ws` package when it is installed.
import { createPublicKey, hash, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createVerifier as createCoreVerifier, type Verifier, type VerifierBaseOptions } from './verifier.js';
import { ScopeFileError, type ScopeFileSource } from './scope-map.js';
import type { FeedSocketConstructor } from './revocation-feed.js';
import { MIN_RSA_BITS, type Rs256 } from './rs256.js';

/** Options of the Node entry point: the scope file as a path, its text, or a parsed document. */
export type VerifierOptions = VerifierBaseOptions & ScopeFileSource;

async function loadWs(): Promise<FeedSocketConstructor | undefined> {
  try {
    // A variable specifier: bundlers must not pull the optional peer `ws` in.
    const name = 'ws';
    return ((await import(name)) as { default: FeedSocketConstructor }).default;
  } catch {
    return undefined; // `ws` not installed: the feed is polled (the verifier warns once)
  }
}

/** The verified-token cache's key, synchronously (WebCrypto's digest would cost a promise per request). */
const tokenDigest = (token: string): string => hash('sha256', token, 'base64');

/** RS256 on node:crypto KeyObjects: imported once per kid, verified synchronously on this thread. */
export const nodeRs256: Rs256 = {
  importKey(jwk) {
    if (typeof jwk.n !== 'string' || typeof jwk.e !== 'string') return undefined;
    const key = createPublicKey({ key: { kty: 'RSA', n: jwk.n, e: jwk.e }, format: 'jwk' });
    return (key.asymmetricKeyDetails?.modulusLength ?? 0) >= MIN_RSA_BITS ? key : undefined;
  },
  verify: (key, signingInput, signature) => verify('sha256', signingInput, key as ReturnType<typeof createPublicKey>, signature),
};

/**
 * Reads the scope file (throws ScopeFileError if it cannot be read or is invalid) and returns the verifier.
 *
 * @example
 * const verifier = createVerifier({ serviceUrl: 'https://ace.example.com', scopesFile: './scopes.yaml' });
 * await verifier.ready(); // keys and revocation feed now; fail fast if the service is unreachable
 * http.createServer(protectNodeHandler(verifier, (req, res) => res.end(req.agent.agentId))).listen(3000);
 */
export function createVerifier(options: VerifierOptions): Verifier {
  const hooks = { fallbackWebSocket: loadWs, tokenDigest, rs256: nodeRs256 };
  if (!('scopesFile' in options)) return createCoreVerifier(options, hooks);
  const { scopesFile, ...rest } = options;
  let text: string;
  try {
    text = readFileSync(scopesFile, 'utf8');
  } catch (error) {
    throw new ScopeFileError(`scope file ${scopesFile} cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  return createCoreVerifier({ ...rest, scopesYaml: text, scopesOrigin: scopesFile }, hooks);
}
