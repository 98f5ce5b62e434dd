// What the running service answers is in the document: every GET of docs/openapi.json sent plainly (no
// credentials, no upgrade, path parameters filled with a fresh UUID, the declared query parameters given), and
// the status code it gets is one the document declares for that operation.
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type ServiceHandle } from '../support/service.js';

interface Operation { parameters?: { name: string; in: string }[]; responses: Record<string, unknown> }
type Document = { paths: Record<string, Record<string, Operation>> };
const document = JSON.parse(readFileSync('docs/openapi.json', 'utf8')) as Document;
const internal = JSON.parse(readFileSync('docs/openapi-internal.json', 'utf8')) as Document;

let service: ServiceHandle;
beforeAll(async () => {
  service = await startService({ mode: 'embedded', env: { ISSUER: 'https://ace.test' } });
}, 90_000);
afterAll(async () => {
  await service?.dispose();
});

describe('the public document against the running service', () => {
  it('declares the query parameters of /oauth2/authorize', () => {
    const names = (document.paths['/oauth2/authorize']!.get!.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name);
    expect(names).toEqual(expect.arrayContaining(['response_type', 'client_id', 'redirect_uri', 'scope', 'state']));
  });

  it.each([['docs/openapi.json', 'publicUrl'], ['docs/openapi-internal.json', 'adminUrl']] as const)('%s declares the status of every plain GET (no upgrade, no credentials, with its query parameters)', async (file, base) => {
    const undocumented: string[] = [];
    let sent = 0;
    for (const [template, operations] of Object.entries((file === 'docs/openapi.json' ? document : internal).paths)) {
      const get = operations.get;
      if (!get) continue;
      const path = template.replace(/\{[^}]+\}/g, () => randomUUID());
      const query = new URLSearchParams((get.parameters ?? []).filter((p) => p.in === 'query').map((p): [string, string] => [p.name, p.name === 'since' ? '0' : 'x']));
      const url = `${service[base]}${path}${query.size > 0 ? `?${query}` : ''}`;
      const answer = await fetch(url);
      await answer.arrayBuffer();
      sent += 1;
      if (!(String(answer.status) in get.responses)) undocumented.push(`GET ${template} -> ${answer.status} (documented: ${Object.keys(get.responses).join(', ')})`);
    }
    expect(sent).toBeGreaterThan(5);
    expect(undocumented).toEqual([]);
  });
});
