// The HTTP ceiling for JWKS: a bare uWebSockets.js server that answers GET /.well-known/jwks.json with the
// very bytes (and caching headers) the service served. Child process entry; the bench starts as many of
// these as the service runs HTTP processes, all on one port (uWS listens with SO_REUSEPORT on Linux).
// Env: PORT, JWKS_FILE. Prints "ready <port>" once listening.
import { readFileSync } from 'node:fs';
import * as uWS from 'uWebSockets.js';

const port = Number(process.env.PORT);
const jwks = readFileSync(process.env.JWKS_FILE!);
// Same guard as the service: the package silently falls back to a pure-JS server without its binary.
if (!/\[native code\]/.test(String(uWS.App))) throw new Error('uWebSockets.js native binary not loaded');

const app = uWS.App()
  .get('/.well-known/jwks.json', (res) => {
    res.cork(() => {
      res.writeStatus('200 OK')
        .writeHeader('content-type', 'application/json')
        .writeHeader('cache-control', 'public, max-age=3600')
        .end(jwks);
    });
  })
  .any('/*', (res) => {
    res.cork(() => res.writeStatus('404 Not Found').end());
  });

app.listen('127.0.0.1', port, (socket) => {
  if (!socket) {
    console.error(`bare uWS could not listen on ${port}`);
    process.exit(1);
  }
  console.log(`ready ${port}`);
});
process.on('SIGTERM', () => process.exit(0));
