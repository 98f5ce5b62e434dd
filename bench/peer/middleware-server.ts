// The platform half's bench server: ONE node:http process with four handlers behind the same warm token,
// so the scenario compares what each costs on identical terms. Child process entry; env PORT (0: any).
// It publishes its own JWKS (an RSA key of its own) and prints "ready <port> <token>" once listening.
//   /plain/orders/1      a plain handler (no token check): the ceiling
//   /protected/orders/1  protectNodeHandler (the middleware: cached verified tokens, scope rule by path)
//   /jose/orders/1       jose jwtVerify on every request against a local JWKS (a bare verifier by hand)
//   /peer/orders/1       express + express-jwt + jwks-rsa (the usual Express stack; JWKS cached by jwks-rsa)
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateKeyPairSync } from 'node:crypto';
import express from 'express';
import { expressjwt } from 'express-jwt';
import jwksRsa from 'jwks-rsa';
import { createLocalJWKSet, exportJWK, jwtVerify, SignJWT } from 'jose';
import { createVerifier, protectNodeHandler } from '@agent-credential-exchange/middleware';

const PLATFORM = '8d7b4f2e-3c1a-4e5b-9f60-1a2b3c4d5e6f';
const BODY = JSON.stringify({ order: 1 });
const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'bench-1', alg: 'RS256', use: 'sig' }] };
const jwksBody = JSON.stringify(jwks);
const localJwks = createLocalJWKSet(jwks);

const answer = (res: http.ServerResponse) => {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(BODY) });
  res.end(BODY);
};
const refuse = (res: http.ServerResponse) => {
  res.writeHead(401, { 'content-type': 'application/json' });
  res.end('{"error":"invalid_token"}');
};

let issuer = '';
let protectedHandler: http.RequestListener = () => {};
let peer: express.Express | undefined;

const server = http.createServer((req, res) => {
  const url = req.url ?? '/';
  if (url.startsWith('/protected/')) return protectedHandler(req, res);
  if (url.startsWith('/plain/')) return answer(res);
  if (url.startsWith('/jose/')) {
    const header = req.headers.authorization;
    const token = header?.startsWith('Bearer ') ? header.slice(7) : '';
    jwtVerify(token, localJwks, { algorithms: ['RS256'], issuer, audience: PLATFORM, requiredClaims: ['exp', 'sub', 'iat'] }).then(
      () => answer(res),
      () => refuse(res),
    );
    return;
  }
  if (url.startsWith('/peer/') && peer) return peer(req, res);
  if (url === '/.well-known/jwks.json') {
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=3600' });
    res.end(jwksBody);
    return;
  }
  res.writeHead(404).end();
});
server.keepAliveTimeout = 60_000;
await new Promise<void>((resolve) => server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', resolve));
const port = (server.address() as AddressInfo).port;
issuer = `http://127.0.0.1:${port}`;

const verifier = createVerifier({
  serviceUrl: issuer,
  scopesDocument: { schema: 'SvcScopesYaml', version: 1, platform_id: PLATFORM, scopes: [{ name: 'orders:read', description: 'read orders' }], routes: [{ method: 'GET', path: '/protected/orders/{id}', scopes: ['orders:read'] }] },
  // No feed service here: a running feed costs a hit two map lookups (revocation-rules.ts).
  revocationFeed: false,
});
await verifier.ready();
protectedHandler = protectNodeHandler(verifier, (_req, res) => answer(res));

const app = express();
app.disable('x-powered-by');
app.get(
  '/peer/orders/:id',
  expressjwt({
    secret: jwksRsa.expressJwtSecret({ jwksUri: `${issuer}/.well-known/jwks.json`, cache: true, rateLimit: true }) as never,
    algorithms: ['RS256'],
    issuer,
    audience: PLATFORM,
  }),
  (_req, res) => {
    res.json({ order: 1 });
  },
);
app.use((err: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
  void _next;
  res.status(401).json({ error: err.name });
});
peer = app;

const now = Math.floor(Date.now() / 1000);
const token = await new SignJWT({ scope: 'orders:read', svc_token_profile: 'svc-native-jwt', client_id: 'ak_bench', jti: 'bench-warm' })
  .setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid: 'bench-1' })
  .setIssuer(issuer)
  .setAudience(PLATFORM)
  .setSubject('agent-bench')
  .setIssuedAt(now)
  .setExpirationTime(now + 3600)
  .sign(privateKey);
console.log(`ready ${port} ${token}`);
process.on('SIGTERM', () => {
  verifier.close();
  server.close();
  process.exit(0);
});
