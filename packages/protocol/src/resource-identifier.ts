// A platform's resource identifiers (RFC 8707 §2, RFC 9728 §1.2): the URIs its servers answer as, e.g. an
// MCP server's canonical URI `https://api.example.com/mcp`. One normal form, so that the registration, the
// token endpoint's lookup and the token's `aud` compare equal whatever spelling a client sends.
// One copy, in the protocol package: the service (registration, the token endpoint, `aud`) and the
// middleware (its `resource` option) import it; test/in-process/resource-identifier.test.ts holds the cases.

/** Longest identifier accepted (a URI in a token's `aud`, a header and a log line). */
export const MAX_RESOURCE_LENGTH = 2048;

/** Hosts where plain http is allowed, for a server under development on the same machine. */
const LOOPBACK_HOST = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/;

export type ResourceCheck = { ok: true; resource: string } | { ok: false; reason: string };

/**
 * The normal form of a resource identifier, or why it cannot be one: absolute, no fragment, no query
 * (RFC 8707 §2 says SHOULD NOT; refused so that two spellings cannot name one server), no user
 * information, `https` (or `http` on a loopback host); scheme and host lower case, default port dropped,
 * trailing slashes of the path dropped (`https://a.example/` and `https://a.example` are one identifier).
 */
export function normaliseResource(text: string): ResourceCheck {
  if (text.length > MAX_RESOURCE_LENGTH) return { ok: false, reason: `is longer than ${MAX_RESOURCE_LENGTH} characters` };
  if (text.includes('#')) return { ok: false, reason: 'has a fragment (RFC 8707 §2)' };
  // The WHATWG parser would strip these silently; a resource identifier is compared as sent.
  if (/[\s\u0000-\u001F\u007F]/.test(text)) return { ok: false, reason: 'contains white space or control characters' };
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { ok: false, reason: 'is not an absolute URI' };
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && LOOPBACK_HOST.test(url.hostname))) {
    return { ok: false, reason: 'must use https (http only on a loopback host: localhost, 127.0.0.0/8, [::1])' };
  }
  if (url.username !== '' || url.password !== '') return { ok: false, reason: 'has user information' };
  if (url.search !== '' || text.includes('?')) return { ok: false, reason: 'has a query (RFC 8707 §2)' };
  // RFC 3986 §6.2.2 on what the WHATWG parser left (it already lower-cases scheme and host, drops the default
  // port and resolves dot segments). Forms whose meaning differs between servers are refused, not guessed:
  // an encoded `/` or `\`, a `\`, `;` parameters, an escape that is not two hex digits, an encoded dot segment.
  if (text.includes('\\')) return { ok: false, reason: 'contains a backslash' };
  if (/%(?![0-9A-Fa-f]{2})/.test(url.pathname)) return { ok: false, reason: 'has a malformed percent-encoding' };
  if (/%(2F|5C)/i.test(url.pathname)) return { ok: false, reason: 'has an encoded slash or backslash in its path' };
  if (url.pathname.includes(';')) return { ok: false, reason: 'has ; parameters in its path' };
  // Escapes of unreserved characters are decoded; the rest keep upper-case hex.
  const decoded = url.pathname.replace(/%([0-9A-Fa-f]{2})/g, (_m, hex: string) => {
    const c = String.fromCharCode(parseInt(hex, 16));
    return /[A-Za-z0-9\-._~]/.test(c) ? c : `%${hex.toUpperCase()}`;
  });
  if (decoded.split('/').some((segment) => segment === '.' || segment === '..')) {
    return { ok: false, reason: 'has an encoded dot segment in its path' };
  }
  // A fully qualified name's final dot names the same host.
  let host = url.host;
  if (url.hostname.endsWith('.') && !url.hostname.startsWith('[')) {
    const name = url.hostname.slice(0, -1);
    if (name === '' || name.endsWith('.')) return { ok: false, reason: 'has an empty label in its host' };
    host = url.port === '' ? name : `${name}:${url.port}`;
  }
  const path = decoded.replace(/\/+$/, '');
  return { ok: true, resource: `${url.protocol}//${host}${path}` };
}
