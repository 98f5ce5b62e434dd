// How a token was obtained, in the audit trail, in process (the memory ports): every case of
// test/support/token-audit-suite.ts through HttpServer.inject. The same suite runs against a service process
// on real Postgres + Redis, reading the table too: test/integration/token-audit.test.ts.
import { inProcessApp } from '../support/in-process.js';
import { describeTokenAudit, TOKEN_AUDIT_ENV } from '../support/token-audit-suite.js';

describeTokenAudit('in process', async () => {
  const app = await inProcessApp({ env: TOKEN_AUDIT_ENV });
  return { publicUrl: app.publicUrl, fetch: app.fetch, admin: app.admin, dispose: () => app.close() };
});
