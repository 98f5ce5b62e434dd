// Terminal injection: an agent name holding ESC and a line break was accepted and printed raw
// by `ace agent list`, so whoever could name an agent could rewrite an operator's terminal (escape
// sequences) or forge table rows. The admin API now refuses C0/C1 control characters in names (422
// validation_error), and the CLI escapes every control character it prints, for names stored before.
// The same for characters that do not show as themselves: bidirectional controls (a name that
// reads as another), zero-width characters (two names that look alike) and U+2028/2029.
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { contractErrorProblem } from '../support/faults.js';
import { runAce } from '../support/ace.js';

// Sets the terminal title, clears the screen, then forges a second table row.
const HOSTILE = 'evil\u001b]0;pwned\u0007\u001b[2J\nFAKE-ID  root  active';
const C1 = 'csi\u009b31m-red';
// Reads as "invoice-admin.exe" in a terminal that applies the override; carries a zero-width space and a
// line separator too.
const BIDI = 'invoice-\u202Eexe.nimda\u202C\u200B\u2028x';
/** One of each refused character beyond C0/C1. */
const INVISIBLE = ['\u061C', '\u200B', '\u200C', '\u200D', '\u200E', '\u200F', '\u2028', '\u2029', '\u202A', '\u202B', '\u202C', '\u202D', '\u202E', '\u2060', '\u2066', '\u2067', '\u2068', '\u2069', '\uFEFF'];
const DETAIL = 'name must not contain control, bidirectional or invisible characters (U+0000–U+001F, U+007F–U+009F, U+061C, U+200B–U+200F, U+2028–U+202E, U+2060–U+2069, U+FEFF).';

function ace(service: ServiceHandle, args: string[]) {
  return runAce(args, { ACE_ADMIN_URL: service.adminUrl, ACE_ADMIN_TOKEN: service.adminToken });
}

const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/;

describe('control characters in names', () => {
  let service: ServiceHandle;
  let admin: AdminClient;

  beforeAll(async () => {
    service = await startService({ mode: 'real' });
    admin = new AdminClient(service);
  });

  afterAll(async () => {
    await service?.dispose();
  });

  it('the admin API refuses C0 and C1 control characters in agent and platform names with 422 validation_error', async () => {
    const agent = await admin.createAgent('plain');
    const attempts: [string, string, unknown][] = [
      ['POST', '/admin/v1/agents', { name: HOSTILE }],
      ['POST', '/admin/v1/agents', { name: C1 }],
      ['POST', '/admin/v1/agents', { name: 'tab\there' }],
      ['PATCH', `/admin/v1/agents/${agent.agent_id}`, { name: 'line\nbreak' }],
      ['POST', '/admin/v1/platforms', { name: 'del\u007f', scopes: [] }],
      ['POST', '/admin/v1/agents', { name: BIDI }],
      ...INVISIBLE.map((c): [string, string, unknown] => ['POST', '/admin/v1/agents', { name: `a${c}b` }]),
      ['PATCH', `/admin/v1/agents/${agent.agent_id}`, { name: 'pl\u200Bain' }],
      ['POST', '/admin/v1/platforms', { name: 'Shop\u202E', scopes: [] }],
    ];
    for (const [method, url, body] of attempts) {
      const response = await fetch(`${service.adminUrl}${url}`, {
        method,
        headers: { authorization: `Bearer ${service.adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const text = await response.text();
      expect(response.status, `${method} ${url} ${JSON.stringify(body)}`).toBe(422);
      expect(contractErrorProblem(response.status, response.headers.get('content-type') ?? undefined, text)).toBeNull();
      const error = JSON.parse(text);
      expect(error.error_code).toBe('validation_error');
      expect(error.detail).toBe(DETAIL);
    }
    // Other characters stay allowed.
    expect((await admin.createAgent('café ☕ – Ünïcode')).name).toBe('café ☕ – Ünïcode');
    expect((await admin.createAgent('שלום עולם مرحبا')).name).toBe('שלום עולם مرحبا'); // right-to-left scripts, no controls
    expect((await admin.request('GET', `/admin/v1/agents/${agent.agent_id}`)).body.name).toBe('plain');
  });

  it('`ace agent list` and `ace agent show` print a name stored before with its control characters escaped', async () => {
    const stored = await admin.createAgent('to-be-rewritten');
    const other = await admin.createAgent('c1-name');
    // As a name stored before the API refused them (straight into the table).
    const sql = postgres(service.database!.url, { max: 1, onnotice: () => {} });
    await sql`UPDATE agents SET name = ${HOSTILE} WHERE id = ${stored.agent_id}`;
    await sql`UPDATE agents SET name = ${C1} WHERE id = ${other.agent_id}`;
    const reordered = await admin.createAgent('bidi-name');
    await sql`UPDATE agents SET name = ${BIDI} WHERE id = ${reordered.agent_id}`;
    const count = Number((await sql`SELECT count(*)::int AS n FROM agents`)[0].n);
    await sql.end();

    const list = await ace(service, ['agent', 'list']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).not.toMatch(CONTROL);
    const lines = list.stdout.trimEnd().split('\n');
    expect(lines.length).toBe(1 + count); // no forged row
    const row = lines.find((l) => l.includes(stored.agent_id))!;
    expect(row).toContain('evil\\u001b]0;pwned\\u0007\\u001b[2J\\nFAKE-ID  root  active');
    expect(lines.find((l) => l.includes(other.agent_id))).toContain('csi\\u009b31m-red');
    expect(lines.find((l) => l.includes(reordered.agent_id))).toContain('invoice-\\u202eexe.nimda\\u202c\\u200b\\u2028x');
    expect(lines.filter((l) => l.startsWith('FAKE-ID'))).toEqual([]);

    const show = await ace(service, ['agent', 'show', stored.agent_id]);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).not.toMatch(CONTROL);
    expect(show.stdout).toContain('evil\\u001b]0;pwned');

    // --json: still valid JSON holding the exact name, with no raw control byte on the terminal.
    const json = await ace(service, ['agent', 'list', '--json']);
    expect(json.code, json.stderr).toBe(0);
    expect(json.stdout).not.toMatch(CONTROL);
    const names = (JSON.parse(json.stdout).agents as { name: string }[]).map((a) => a.name);
    expect(names).toContain(HOSTILE);
    expect(names).toContain(C1);
    expect(names).toContain(BIDI);
  });
});
