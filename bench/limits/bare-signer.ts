// The practical ceiling of an RS256 token endpoint on this machine: a bare uWebSockets.js handler that
// reads the body and signs a JWT of the same shape with crypto.sign (no validation, no credentials, no
// stores, no metrics). Two ways to use the cores:
//   SIGN_MODE=sync   signs on the HTTP thread; one process uses one core (the bench runs one per core);
//   SIGN_MODE=async  crypto.sign with a callback, run on libuv's thread pool (UV_THREADPOOL_SIZE), so one
//                    process uses every core, as the service does with its signing dispatcher.
// Env: PORT, SIGN_MODE. Prints "ready <port>" once listening.
import { generateKeyPairSync, randomUUID, sign } from 'node:crypto';
import * as uWS from 'uWebSockets.js';

const port = Number(process.env.PORT);
const mode = process.env.SIGN_MODE === 'async' ? 'async' : 'sync';
if (!/\[native code\]/.test(String(uWS.App))) throw new Error('uWebSockets.js native binary not loaded');
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const header = Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: 'bare' })).toString('base64url');

function signingInput(): string {
  const iat = Math.floor(Date.now() / 1000);
  const payload = Buffer.from(
    JSON.stringify({ iss: 'bare', sub: randomUUID(), aud: randomUUID(), iat, nbf: iat, exp: iat + 900, jti: randomUUID(), scope: 'read' }),
  ).toString('base64url');
  return `${header}.${payload}`;
}

function answer(res: uWS.HttpResponse, input: string, signature: Buffer): void {
  res.cork(() => {
    res
      .writeHeader('content-type', 'application/json')
      .end(JSON.stringify({ access_token: `${input}.${signature.toString('base64url')}`, token_type: 'Bearer', expires_in: 900 }));
  });
}

const app = uWS.App().post('/token', (res) => {
  let aborted = false;
  res.onAborted(() => (aborted = true));
  res.onData((_chunk, isLast) => {
    if (!isLast || aborted) return;
    const input = signingInput();
    if (mode === 'sync') return answer(res, input, sign('sha256', Buffer.from(input), privateKey));
    sign('sha256', Buffer.from(input), privateKey, (error, signature) => {
      if (aborted) return;
      if (error) return res.cork(() => res.writeStatus('500 Internal Server Error').end());
      answer(res, input, signature);
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
