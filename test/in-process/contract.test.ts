// The public contract in process: every case of test/support/contract-suite.ts through HttpServer.inject (the
// same handlers, framing checks, limits and guards as over a socket) to the whole app on the memory ports
// (test/support/in-process.ts). The store-dependent cases run again in a service process over real Postgres +
// Redis and over the embedded PGlite: test/integration/contract.test.ts.
import { expect, it } from 'vitest';
import { inProcessApp, type InProcessApp } from '../support/in-process.js';
import { CONTRACT_ENV, describeContract, expectError, type ContractTarget } from '../support/contract-suite.js';

let app: InProcessApp;

describeContract(
  'in process',
  async (): Promise<ContractTarget> => {
    app = await inProcessApp({ env: CONTRACT_ENV });
    return { publicUrl: app.publicUrl, adminUrl: app.adminUrl, adminToken: app.adminToken, fetch: app.fetch, admin: app.admin, workerPools: false, dispose: () => app.close() };
  },
  {
    everything: true,
    // inject delivers a body in pieces (no socket needed): the limit counted, the connection closed.
    extraBodyCases: () => {
    it('413 also when the body comes in pieces without a declared length, then closes the connection', async () => {
      const answer = await app.inject({
        method: 'POST', url: '/api/v1/auth/token',
        headers: [['content-type', 'application/json'], ['transfer-encoding', 'chunked']],
        body: 'z'.repeat(64 * 1024), chunks: 16,
      });
      expectError({ status: answer.status, headers: new Headers(answer.headers), body: answer.json() }, 413, 'payload_too_large');
      expect(answer.closed).toBe(true);
    });
    },
  },
);
