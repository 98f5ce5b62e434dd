// Refusals as RFC 6750 section 3 describes them: 401 with a Bearer challenge (no error attribute when
// the request carried no token at all), 400 invalid_request, 401 invalid_token, 403 insufficient_scope
// with the scopes the route needs. The JSON body has the service's error shape {detail, error_code}.

export type RefusalCode = 'unauthorized' | 'invalid_request' | 'invalid_token' | 'insufficient_scope' | 'service_unavailable' | 'resource_metadata';

/**
 * An answer the verifier gives instead of the handler. Status 200 (code `resource_metadata`) is the
 * RFC 9728 metadata document: every adapter writes it exactly as it writes a refusal, so none needs to
 * know about it.
 */
export interface Refusal {
  ok: false;
  status: 200 | 400 | 401 | 403 | 414 | 503;
  /** Value of the WWW-Authenticate header (absent on 503). */
  wwwAuthenticate?: string;
  /** Extra headers to send (Retry-After on 503). */
  headers: Record<string, string>;
  /** JSON text: {"detail": "...", "error_code": "..."}. */
  body: string;
  code: RefusalCode;
}

/** RFC 6750 attribute values are quoted-strings limited to %x20-21 / %x23-5B / %x5D-7E: drop the rest. */
function quoted(value: string): string {
  return `"${value.replace(/[^\x20\x21\x23-\x5b\x5d-\x7e]/g, '')}"`;
}

function challenge(realm: string, attributes: Record<string, string | undefined>): string {
  const parts = [`realm=${quoted(realm)}`];
  for (const [name, value] of Object.entries(attributes)) if (value !== undefined) parts.push(`${name}=${quoted(value)}`);
  return `Bearer ${parts.join(', ')}`;
}

function refusal(status: Refusal['status'], code: RefusalCode, detail: string, wwwAuthenticate?: string, headers: Record<string, string> = {}): Refusal {
  return {
    ok: false,
    status,
    code,
    wwwAuthenticate,
    headers: wwwAuthenticate ? { ...headers, 'www-authenticate': wwwAuthenticate } : headers,
    body: JSON.stringify({ detail, error_code: code }),
  };
}

export function missingToken(realm: string): Refusal {
  return refusal(401, 'unauthorized', 'A Bearer access token is required.', challenge(realm, {}));
}

export function invalidRequest(realm: string, description: string): Refusal {
  return refusal(400, 'invalid_request', description, challenge(realm, { error: 'invalid_request', error_description: description }));
}

/** A request path with no single reading (canonical-path.ts): refused before any handler runs. */
export function badPath(description: string): Refusal {
  return refusal(400, 'invalid_request', description);
}

/** A request path or segment over the verifier's length limits: refused before anything reads it. */
export function uriTooLong(description: string): Refusal {
  return refusal(414, 'invalid_request', description);
}

export function invalidToken(realm: string, description: string): Refusal {
  return refusal(401, 'invalid_token', description, challenge(realm, { error: 'invalid_token', error_description: description }));
}

export function insufficientScope(realm: string, description: string, required: string[] | undefined): Refusal {
  return refusal(
    403,
    'insufficient_scope',
    description,
    challenge(realm, { error: 'insufficient_scope', error_description: description, scope: required?.join(' ') }),
  );
}

export function unavailable(retryAfterSeconds: number): Refusal {
  return refusal(503, 'service_unavailable', 'The access token cannot be verified right now; try again later.', undefined, {
    'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))),
  });
}

/** RFC 9728 §3.2: the protected-resource metadata document, answered in place of the handler. */
export function resourceMetadataAnswer(metadata: Record<string, unknown>): Refusal {
  return { ok: false, status: 200, code: 'resource_metadata', headers: {}, body: JSON.stringify(metadata) };
}

/** RFC 9728 §5.1: the 401's Bearer challenge names the metadata URL. */
export function withResourceMetadata(refusal: Refusal, url: string): Refusal {
  if (!refusal.wwwAuthenticate) return refusal;
  const wwwAuthenticate = `${refusal.wwwAuthenticate}, resource_metadata=${quoted(url)}`;
  return { ...refusal, wwwAuthenticate, headers: { ...refusal.headers, 'www-authenticate': wwwAuthenticate } };
}
