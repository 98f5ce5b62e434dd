// The practical ceiling of an RS256 token endpoint on this machine: a bare uWebSockets.js handler that
// reads the body and signs a JWT of the same shape with crypto.sign, synchronously on its HTTP thread
// (no validation, no credentials, no stores, no metrics). The bench runs one per core on one port.
// Env: PORT. Prints "ready <port>" once listening.
import { generateKeyPairSync, randomUUID, sign } from 'node:crypto';
import * as uWS from 'uWebSockets.js';

const port = Number(process.env.PORT);
if (!/\[native code\]/.test(String(uWS.App))) throw new Error('uWebSockets.js native binary not loaded');
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const header = Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: 'bare' })).toString('base64url');

const app = uWS.App().post('/token', (res) => {
  let aborted = false;
  res.onAborted(() => (aborted = true));
  res.onData((_chunk, isLast) => {
    if (!isLast || aborted) return;
    const iat = Math.floor(Date.now() / 1000);
    const payload = Buffer.from(
      JSON.stringify({ iss: 'bare', sub: randomUUID(), aud: randomUUID(), iat, nbf: iat, exp: iat + 900, jti: randomUUID(), scope: 'read' }),
    ).toString('base64url');
    const input = `${header}.${payload}`;
    const signature = sign('sha256', Buffer.from(input), privateKey).toString('base64url');
    res.cork(() => {
      res.writeHeader('content-type', 'application/json').end(JSON.stringify({ access_token: `${input}.${signature}`, token_type: 'Bearer', expires_in: 900 }));
    });
  });
});

app.listen('127.0.0.1', port, (socket) => {
  if (!socket) {
    console.error(`bare signer could not listen on ${port}`);
    process.exit(1);
  }
  console.log(`ready ${port}`);
});
process.on('SIGTERM', () => process.exit(0));
