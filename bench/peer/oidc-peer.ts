// The peer: node-oidc-provider 9 issuing RS256 JWT access tokens through the client_credentials grant,
// bound to a resource indicator (the OAuth equivalent of our token endpoint). Child process entry.
// Env: PORT, PEER_WORKERS (node:cluster processes sharing the port, so the peer gets the same cores as
// the service). Prints "ready <port> <client_id> <client_secret> <resource>" once every worker listens.
import cluster from 'node:cluster';
import { randomBytes } from 'node:crypto';
import { exportJWK, generateKeyPair } from 'jose';

const port = Number(process.env.PORT);
const workers = Math.max(1, Number(process.env.PEER_WORKERS ?? '1'));
const RESOURCE = 'https://api.bench.example';
const SCOPE = 'orders:read orders:write';

async function startProvider(privateJwk: Record<string, unknown>, clientSecret: string): Promise<void> {
  // oidc-provider is ESM-only and ships no types; a computed specifier keeps tsc out of it.
  const specifier = 'oidc-provider';
  const { default: Provider } = (await import(specifier)) as { default: new (issuer: string, config: unknown) => any };
  const provider = new Provider(`http://127.0.0.1:${port}`, {
    clients: [
      {
        client_id: 'bench-client',
        client_secret: clientSecret,
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
        token_endpoint_auth_method: 'client_secret_post',
        scope: SCOPE,
      },
    ],
    scopes: SCOPE.split(' '),
    jwks: { keys: [privateJwk] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => RESOURCE,
        useGrantedResource: () => true,
        getResourceServerInfo: () => ({
          scope: SCOPE,
          audience: RESOURCE,
          accessTokenTTL: 900,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        }),
      },
    },
  });
  await new Promise<void>((resolve) => provider.listen(port, '127.0.0.1', resolve));
}

if (cluster.isPrimary) {
  // The primary makes the key and the client secret once, so every worker signs with the same key.
  const { privateKey } = await generateKeyPair('RS256', { modulusLength: 2048, extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), alg: 'RS256', use: 'sig', kid: 'peer-key-1' };
  const clientSecret = randomBytes(32).toString('base64url');
  const announce = () => console.log(`ready ${port} bench-client ${clientSecret} ${RESOURCE}`);
  if (workers === 1) {
    await startProvider(jwk, clientSecret);
    announce();
  } else {
    let listening = 0;
    cluster.on('listening', () => {
      if (++listening === workers) announce();
    });
    cluster.on('exit', (_worker, code, signal) => {
      console.error(`peer worker exited (${code ?? signal})`);
      process.exit(1);
    });
    for (let i = 0; i < workers; i++) {
      cluster.fork({ PEER_JWK: JSON.stringify(jwk), PEER_CLIENT_SECRET: clientSecret });
    }
    process.on('SIGTERM', () => {
      cluster.removeAllListeners('exit');
      for (const worker of Object.values(cluster.workers ?? {})) worker?.kill();
      process.exit(0);
    });
  }
} else {
  await startProvider(JSON.parse(process.env.PEER_JWK!), process.env.PEER_CLIENT_SECRET!);
}
