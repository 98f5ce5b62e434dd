// One spelling per path. A request target can name the same resource in many ways (%65 for "e", "/./",
// a trailing slash, upper case, ";params"), and a router that reads it differently from the scope check
// runs a handler whose scopes were never checked. Where the middleware cannot learn which route the
// framework chose (plain node:http), it rewrites the target into one canonical form, refuses what has no
// single reading, and hands the canonical form on so the handler routes on exactly what was checked.
//
// Policy (docs/client-and-middleware.md, "Canonical paths"):
// - origin form only ("/..."); no fragment; path characters limited to RFC 3986 pchar and "/";
// - %XX of an unreserved character (A-Z a-z 0-9 - . _ ~) is decoded; any other %XX is kept, hex upper case;
// - refused (400): a malformed %, an encoded "/", "\" or control character (NUL included), an encoded "%"
//   followed by two hex digits (double encoding), an empty segment ("//"), a "." or ".." segment, raw or
//   encoded;
// - one trailing slash is dropped ("/orders/42/" is "/orders/42"); case is kept (matching is case-sensitive).
//
// Cost: every step here is linear in the target's length (no regular expression that can backtrack), and the
// verifier refuses a path or segment over its length limits (`pathTooLong`) before anything else reads it.

export type CanonicalTarget =
  | { ok: true; /** "/a/b" */ path: string; segments: string[]; /** "" or "?..." as received */ query: string }
  | { ok: false; reason: string };

// RFC 3986 pchar plus "/": unreserved, sub-delims, ":", "@" and "%" (escapes are checked one by one).
const PATH_CHARS = /^[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*$/;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
const HEX2 = /^[0-9A-Fa-f]{2}$/;

/** Longest request path (query excluded) the verifier reads, in characters: a longer one is answered 414. */
export const DEFAULT_MAX_PATH_LENGTH = 4096;
/** Longest path segment (between two "/") the verifier reads, in characters: a longer one is answered 414. */
export const DEFAULT_MAX_SEGMENT_LENGTH = 1024;

export interface PathLimits {
  maxPathLength: number;
  maxSegmentLength: number;
}

/**
 * Why the path of a request target exceeds the limits, or undefined. One pass over the characters and no
 * regular expression: it runs before anything else looks at the target.
 */
export function pathTooLong(target: string, limits: PathLimits): string | undefined {
  let segmentLength = 0;
  for (let i = 0; i < target.length; i++) {
    const ch = target.charCodeAt(i);
    if (ch === 0x3f /* ? */ || ch === 0x23 /* # */) break;
    if (i >= limits.maxPathLength) return `The request path is longer than ${limits.maxPathLength} characters.`;
    segmentLength = ch === 0x2f /* / */ ? 0 : segmentLength + 1;
    if (segmentLength > limits.maxSegmentLength) return `A request path segment is longer than ${limits.maxSegmentLength} characters.`;
  }
  return undefined;
}

function refuse(reason: string): CanonicalTarget {
  return { ok: false, reason };
}

/** Decodes the escapes of unreserved characters in one segment, or says why the segment is refused. */
function canonicalSegment(segment: string): { value: string } | { reason: string } {
  let out = '';
  for (let i = 0; i < segment.length; i++) {
    const ch = segment[i];
    if (ch !== '%') {
      out += ch;
      continue;
    }
    const hex = segment.slice(i + 1, i + 3);
    if (!HEX2.test(hex)) return { reason: 'The request path has a malformed percent-escape.' };
    const code = parseInt(hex, 16);
    const decoded = String.fromCharCode(code);
    if (code === 0x2f || code === 0x5c) return { reason: 'The request path has an encoded slash or backslash.' };
    if (code < 0x20 || code === 0x7f) return { reason: 'The request path has an encoded control character.' };
    out += UNRESERVED.test(decoded) ? decoded : `%${hex.toUpperCase()}`;
    i += 2;
  }
  if (out === '.' || out === '..') return { reason: 'The request path has a dot-segment.' };
  // "%2565" (or "%25%36%35") reads as "%65" after one decoding and "e" after two: no single reading.
  if (/%25[0-9A-Fa-f]{2}/.test(out)) return { reason: 'The request path is percent-encoded twice.' };
  return { value: out };
}

/** The canonical form of a request target (path and query as received), or why it has none. */
export function canonicalizeTarget(target: string): CanonicalTarget {
  // Absolute form ("http://host/x") and asterisk form ("*") are for proxies and OPTIONS, not for routes.
  if (!target.startsWith('/')) return refuse('The request target must be an absolute path.');
  if (target.includes('#')) return refuse('The request target must not carry a fragment.');
  const q = target.indexOf('?');
  const rawPath = q === -1 ? target : target.slice(0, q);
  const query = q === -1 ? '' : target.slice(q);
  if (!PATH_CHARS.test(rawPath)) return refuse('The request path has characters that must be percent-encoded.');
  if (rawPath === '/') return { ok: true, path: '/', segments: [], query };

  const raw = rawPath.slice(1).split('/');
  if (raw[raw.length - 1] === '') raw.pop(); // one trailing slash
  const segments: string[] = [];
  for (const segment of raw) {
    if (segment === '') return refuse('The request path has an empty segment.');
    const result = canonicalSegment(segment);
    if ('reason' in result) return refuse(result.reason);
    segments.push(result.value);
  }
  return { ok: true, path: `/${segments.join('/')}`, segments, query };
}

/**
 * A deliberately loose reading of a canonical segment, as the most lenient handlers might read it:
 * fully percent-decoded, ";params" cut off, surrounding whitespace and trailing dots dropped. Used only
 * to detect doubt: if the loose reading names another rule than the exact one, the request is refused.
 */
export function looseSegment(segment: string): string {
  let value = segment;
  try {
    value = decodeURIComponent(segment);
  } catch {
    // invalid UTF-8 escapes: keep the segment as it is
  }
  const semicolon = value.indexOf(';');
  if (semicolon !== -1) value = value.slice(0, semicolon);
  return trimTrailingSpaceAndDots(value.trim());
}

// One character at a time from the end: /[\s.]+$/ would retry from every position of a run of dots that
// is not at the end ("....x"), quadratic in the run's length.
const SPACE_OR_DOT = /^[\s.]$/u;
function trimTrailingSpaceAndDots(value: string): string {
  let end = value.length;
  while (end > 0 && SPACE_OR_DOT.test(value[end - 1])) end--;
  return value.slice(0, end);
}
