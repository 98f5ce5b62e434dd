// application/x-www-form-urlencoded bodies (the OAuth token endpoint, RFC 6749 §4.4.2). Size (413) is
// enforced while reading, in the server, as for JSON; this adds the media type and RFC 6749 §3.2's rule
// that a parameter sent more than once is an error.

const FORM_MEDIA_TYPE = /^application\/x-www-form-urlencoded\s*(;.*)?$/i;

export type FormRefusal = 'media_type' | 'duplicate' | 'encoding';

export class FormError extends Error {
  constructor(
    readonly reason: FormRefusal,
    detail: string,
  ) {
    super(detail);
    this.name = 'FormError';
  }
}

/** The parameters of a form body, each present once. Empty values count as absent (RFC 6749 §3.2). */
export function parseFormBody(contentType: string, body: Buffer | null): Map<string, string> {
  if (!FORM_MEDIA_TYPE.test(contentType.trim())) throw new FormError('media_type', 'Content-Type must be application/x-www-form-urlencoded.');
  const text = (body ?? Buffer.alloc(0)).toString('utf8');
  // A malformed escape (%zz) would be kept as literal text by URLSearchParams: refuse it instead.
  if (/%(?![0-9A-Fa-f]{2})/.test(text)) throw new FormError('encoding', 'The body has a malformed percent-encoding.');
  const params = new Map<string, string>();
  for (const [name, value] of new URLSearchParams(text)) {
    if (params.has(name)) throw new FormError('duplicate', `Parameter "${name.slice(0, 64)}" is sent more than once.`);
    params.set(name, value);
  }
  for (const [name, value] of params) if (value === '') params.delete(name);
  return params;
}

/** One application/x-www-form-urlencoded component (`+` is a space), or undefined when malformed. */
export function formDecode(text: string): string | undefined {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return undefined; // a malformed escape: the caller refuses the credentials
  }
}
