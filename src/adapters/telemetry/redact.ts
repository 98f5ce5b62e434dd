// Redaction at any depth: pino's `redact` paths name fixed positions (`*.secret` is one level deep), so
// `req.body.secret` or a secret inside an array would pass. This walks every plain object and array of a
// log record and replaces the value of every sensitive key, wherever it is.

export const CENSOR = '[redacted]';

/** Sensitive key names, compared case-insensitively and ignoring `_` and `-` (adminToken = admin_token). */
const SENSITIVE = new Set(
  [
    'secret',
    'secret_hash',
    'admin_token',
    'authorization',
    'proxy_authorization',
    'cookie',
    'set_cookie',
    'access_token',
    'refresh_token',
    'private_key',
    'private_key_pem',
    'private_key_encrypted',
    'key_encryption_key',
    'password',
    'database_url',
    'redis_url',
  ].map(normalise),
);

/** Deeper than this, a branch is replaced whole: a log record is never that deep on purpose. */
const MAX_DEPTH = 32;

function normalise(key: string): string {
  return key.toLowerCase().replace(/[-_]/g, '');
}

export function isSensitiveKey(key: string): boolean {
  return SENSITIVE.has(normalise(key));
}

const isPlain = (value: object): boolean => {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
};

/**
 * A copy of `value` with every sensitive key's value censored, at any depth, in plain objects and arrays.
 * Other objects (Error, Date, Buffer, class instances) are kept as they are: pino serialises them itself
 * (errors through its `err` serializer, which logs message, type and stack only). Shared and circular
 * references are walked once. Returns `value` itself when nothing needed censoring.
 */
export function redactDeep<T>(value: T): T {
  return walk(value, 0, new WeakMap()) as T;
}

function walk(value: unknown, depth: number, seen: WeakMap<object, unknown>): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (!Array.isArray(value) && !isPlain(value)) return value;
  if (seen.has(value)) return seen.get(value);
  if (depth >= MAX_DEPTH) return CENSOR;
  if (Array.isArray(value)) {
    const copy: unknown[] = [];
    seen.set(value, copy);
    let changed = false;
    for (const item of value) {
      const next = walk(item, depth + 1, seen);
      changed ||= next !== item;
      copy.push(next);
    }
    if (!changed) seen.set(value, value);
    return changed ? copy : value;
  }
  const copy: Record<string, unknown> = {};
  seen.set(value, copy);
  let changed = false;
  for (const [key, item] of Object.entries(value)) {
    const next = isSensitiveKey(key) && item !== undefined && item !== null ? CENSOR : walk(item, depth + 1, seen);
    changed ||= next !== item;
    copy[key] = next;
  }
  if (!changed) seen.set(value, value);
  return changed ? copy : value;
}
