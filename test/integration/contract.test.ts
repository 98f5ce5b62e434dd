// The public contract end to end in a service process, run twice: against real Postgres + Redis, and
// against the embedded default (PGlite, in-process cache and limiter): the cases of
// test/support/contract-suite.ts whose answer depends on the stores, the worker pools or a real socket
// (issuance verified with the served JWKS, changes that must win over the caches, the limits (Redis or
// in-process), listings and scope files read from the store, health, readiness and metrics), and a body
// streamed over a socket. Every case, the request handling included, runs in process:
// test/in-process/contract.test.ts.
import { expect, it } from 'vitest';
import net from 'node:net';
import { AdminClient } from '../../kit/admin.js';
import { startService } from '../support/service.js';
import { CONTRACT_ENV, describeContract, type ContractTarget } from '../support/contract-suite.js';

for (const mode of ['real', 'embedded'] as const) {
  describeContract(
    mode,
    async (): Promise<ContractTarget> => {
      const service = await startService({ mode, env: CONTRACT_ENV });
      return { publicUrl: service.publicUrl, adminUrl: service.adminUrl, adminToken: service.adminToken, fetch: globalThis.fetch, admin: new AdminClient(service), workerPools: true, dispose: () => service.dispose() };
    },
    {
      everything: false,
      extraBodyCases: ({ target }) => {
    it('413 also when the body is streamed without a declared length, then closes the connection', async () => {
      // A raw socket: fetch clients report EPIPE when the server answers and closes mid-upload.
      // 2 MiB, so the client is still writing when the limit is crossed: a server that closes at once
      // (reset, unread bytes) loses the 413 more often than not; it must wait until the client stops.
      const { port } = new URL(target().publicUrl);
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = net.connect(Number(port), '127.0.0.1');
        let received = '';
        socket.on('data', (d) => (received += d));
        socket.on('close', () => resolve(received));
        socket.on('error', () => resolve(received));
        socket.setTimeout(10_000, () => reject(new Error('no answer')));
        socket.write('POST /api/v1/auth/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
        const chunk = 'z'.repeat(4096);
        let sent = 0;
        const pump = () => {
          if (socket.destroyed || sent > 512) return;
          sent++;
          socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`, () => setImmediate(pump));
        };
        pump();
      });
      expect(answer).toMatch(/^HTTP\/1\.1 413 /);
      expect(answer).toContain('"error_code":"payload_too_large"');
    });
      },
    },
  );
}
