// Request framing checks against request smuggling. uWS frames bodies leniently: with two Content-Length
// fields it uses the first and serves the rest of the body as a second request, and it decodes
// `xchunked`, `chunkedx`, `identity` or `chunked, gzip` as chunked. A front proxy that frames the same
// bytes differently then sees one request where we see two. So every request whose length is ambiguous is
// refused before any handler work, and the connection is closed (what follows on it cannot be trusted).
// Strict reading of RFC 9112 §6: one Content-Length of digits only; no Content-Length with
// Transfer-Encoding; Transfer-Encoding only as the single coding `chunked` (coding names are
// case-insensitive, §7).

export interface FramingRefusal {
  code: 'bad_request' | 'not_implemented';
  detail: string;
}

/** The framing headers of one request: every Content-Length and Transfer-Encoding field, in order. */
export interface FramingFields {
  contentLength: string[];
  transferEncoding: string[];
}

const DIGITS = /^[0-9]+$/;

/** Null when the request's body length is unambiguous; otherwise why it is refused. */
export function framingRefusal({ contentLength, transferEncoding }: FramingFields): FramingRefusal | null {
  if (contentLength.length > 1) return { code: 'bad_request', detail: 'More than one Content-Length.' };
  if (contentLength.length === 1 && !DIGITS.test(contentLength[0].trim())) return { code: 'bad_request', detail: 'Content-Length is not a number.' };
  if (transferEncoding.length === 0) return null;
  if (contentLength.length > 0) return { code: 'bad_request', detail: 'Content-Length together with Transfer-Encoding.' };
  const codings = transferEncoding.join(',').split(',').map((c) => c.trim().toLowerCase());
  if (codings.some((c) => c === '')) return { code: 'bad_request', detail: 'Empty Transfer-Encoding.' };
  if (codings.some((c) => c !== 'chunked')) return { code: 'not_implemented', detail: 'Only the chunked transfer coding is supported.' };
  if (codings.length > 1) return { code: 'bad_request', detail: 'Transfer-Encoding chunked more than once.' };
  return null;
}
