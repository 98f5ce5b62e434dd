// Resource identifiers (RFC 8707 / RFC 9728) in one normal form, one copy in the protocol package
// (packages/protocol/src/resource-identifier.ts) that the service (registration, the token endpoint's lookup,
// `aud`) and the middleware (its `resource` option) import: the cases run on it and on the middleware's
// public export of it (its edge entry, as a platform imports it).
import { describe, expect, it } from 'vitest';
import { normaliseResource as protocol } from '../../packages/protocol/src/resource-identifier.js';
import { normaliseResource as middleware } from '../../packages/middleware/src/edge.js';

const SAME: [string, string][] = [
  ['https://api.example.com/mcp', 'https://api.example.com/mcp'],
  ['HTTPS://API.Example.COM/mcp', 'https://api.example.com/mcp'],
  ['https://api.example.com:443/mcp/', 'https://api.example.com/mcp'],
  ['https://api.example.com/', 'https://api.example.com'],
  ['https://api.example.com', 'https://api.example.com'],
  ['https://api.example.com:8443/mcp', 'https://api.example.com:8443/mcp'],
  ['http://127.0.0.1:3000/mcp', 'http://127.0.0.1:3000/mcp'],
  ['http://localhost:80/mcp', 'http://localhost/mcp'],
  ['http://[::1]:3000/', 'http://[::1]:3000'],
  ['http://127.1.2.3/x', 'http://127.1.2.3/x'],
  // The path keeps its case: /MCP and /mcp are two resources.
  ['https://api.example.com/MCP', 'https://api.example.com/MCP'],
  // RFC 3986 §6.2.2: escapes of unreserved characters decoded, the rest upper-case hex; the FQDN dot dropped.
  ['https://api.example.com/%6Dcp', 'https://api.example.com/mcp'],
  ['https://api.example.com/mc%70', 'https://api.example.com/mcp'],
  ['https://api.example.com/%7e%41-%5f', 'https://api.example.com/~A-_'],
  ['https://api.example.com/a%c3%a9', 'https://api.example.com/a%C3%A9'],
  ['https://api.example.com/a%20b', 'https://api.example.com/a%20b'],
  ['https://api.example.com./mcp', 'https://api.example.com/mcp'],
  ['https://API.example.com.:443/mcp', 'https://api.example.com/mcp'],
  ['https://api.example.com/a/./b/../mcp', 'https://api.example.com/a/mcp'],
];

const REFUSED = [
  'http://api.example.com/mcp', // plain http off the loopback host
  'http://127.0.0.1.example.com/mcp',
  'https://api.example.com/mcp#x',
  'https://api.example.com/mcp?tenant=1',
  'https://user:pw@api.example.com/',
  '/mcp',
  'api.example.com/mcp',
  'ftp://api.example.com/',
  ' https://api.example.com/mcp',
  'https://api.example.com/m\ncp',
  `https://api.example.com/${'a'.repeat(2100)}`,
  // Forms that cannot be normalised safely: servers disagree on what they name.
  'https://api.example.com/mcp%2F',
  'https://api.example.com/mcp%2fx',
  'https://api.example.com/mcp%5C',
  'https://api.example.com/mcp;x',
  'https://api.example.com/a\\mcp',
  'https://api.example.com/mc%zz',
  'https://api.example.com../mcp',
];

describe.each([
  ['protocol', protocol],
  ['middleware', middleware],
])('normaliseResource (%s)', (_side, normalise) => {
  it.each(SAME)('%s → %s', (input, expected) => {
    expect(normalise(input)).toEqual({ ok: true, resource: expected });
    // Idempotent: the normal form is its own normal form.
    expect(normalise(expected)).toEqual({ ok: true, resource: expected });
  });
  it.each(REFUSED)('refuses %j', (input) => {
    expect(normalise(input)).toMatchObject({ ok: false, reason: expect.any(String) });
  });
});
