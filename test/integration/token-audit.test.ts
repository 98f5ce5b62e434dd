// How a token was obtained, in the audit trail, against a service process on real Postgres + Redis: every
// case of test/support/token-audit-suite.ts over HTTP (the worker pools, the group-committed trail), and the
// table itself: the new fields are in each row's `data`, a claimed value with a lone surrogate did not fail
// its batch (Postgres refuses one in jsonb), and no secret or assertion text is in any column. In process:
// test/in-process/token-audit.test.ts.
import postgres from 'postgres';
import { expect, it } from 'vitest';
import { AdminClient } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { describeTokenAudit, expectNothingSent, TOKEN_AUDIT_ENV } from '../support/token-audit-suite.js';

let service: ServiceHandle;

describeTokenAudit(
  'real Postgres and Redis',
  async () => {
    service = await startService({ mode: 'real', env: TOKEN_AUDIT_ENV });
    return { publicUrl: service.publicUrl, fetch: globalThis.fetch, admin: new AdminClient(service), dispose: () => service.dispose() };
  },
  ({ sent }) => {
    it('the table holds the fields in `data`, cleaned, and no secret or assertion in any column', async () => {
      const sql = postgres(service.database!.url, { max: 1, onnotice: () => {} });
      let rows: { type: string; data: Record<string, unknown> | null; row: string }[];
      try {
        rows = await sql`SELECT type, data, row_to_json(e)::text AS row FROM audit_events e WHERE type IN ('token.issued', 'token.refused')`;
      } finally {
        await sql.end();
      }
      const methods = new Set(rows.map((r) => r.data?.auth_method));
      expect(methods).toEqual(new Set(['client_secret', 'private_key_jwt', 'workload']));
      // The hostile refusals were stored (a lone surrogate left in would have failed their whole batch).
      expect(rows.some((r) => r.type === 'token.refused' && String(r.data?.api_key_id ?? '').startsWith('client-\uFFFDevil'))).toBe(true);
      for (const r of rows) {
        for (const value of Object.values(r.data ?? {})) {
          if (typeof value === 'string') expect(value).not.toMatch(/[\u0000-\u001F\u007F-\u009F\u061C\u200B-\u200F\u2028-\u202E\u2060-\u2069\uFEFF]/);
        }
      }
      const { secrets, assertions } = sent();
      expectNothingSent(rows.map((r) => r.row).join('\n'), secrets, assertions);
    });
  },
);
