// Audit events: what is recorded for each credential event, built here from typed inputs so that no
// caller can slip a secret, a hash, key material or the admin token into the trail (the builders accept
// only ids, names and codes). The id and time are fixed when the event is built: every retry and every
// spool replay writes the same (at, id), which the table's unique key turns into exactly one row.
import { randomUUID } from 'node:crypto';
import type { ClientAuthentication, ClientAuthMethod } from '../credentials/client-authentication.js';

export const EVENT_TYPES = [
  'token.issued',
  'token.refused',
  'token.refusals_aggregated',
  'listing.served',
  'agent.created',
  'agent.updated',
  'agent.secret_rotated',
  'grant.put',
  'grant.deleted',
  'platform.created',
  'platform.updated',
  'key.rotated',
  'key.retired',
  'feed_credential.created',
  'feed_credential.deleted',
  'agent.key_added',
  'agent.key_removed',
  'workload_issuer.created',
  'workload_issuer.deleted',
  'workload_binding.created',
  'workload_binding.deleted',
  'admin.auth_failed',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** Type-specific fields, stored as JSON. Only these keys exist: none of them can hold a secret. */
export interface EventData {
  scope?: string;
  error_code?: string;
  /** The public key identifier presented (never the secret). */
  api_key_id?: string;
  /** Names of the fields an admin change set. */
  fields?: string[];
  /** Scopes of a grant (names, as defined on the platform). */
  scopes?: string[];
  grace_seconds?: number;
  status?: string;
  /** admin.auth_failed: the method and path attempted. */
  request?: string;
  /** token.refusals_aggregated: refusals not recorded one by one in the window, per error code. */
  refusals?: number;
  error_codes?: Record<string, number>;
  /** token.refusals_aggregated: the window's start (RFC 3339) and length. */
  window_start?: string;
  window_seconds?: number;
  /** feed_credential.*: the credential's id (never its token or hash). */
  feed_credential_id?: string;
  /** agent.key_*: the client key's `kid` (a public key's name, never key material). */
  client_kid?: string;
  /** workload_*: the trusted issuer's id, and the workload subject bound. */
  issuer_id?: string;
  subject?: string;
  /** token.issued, token.refused: how the client authenticated (client_secret, private_key_jwt, workload). */
  auth_method?: ClientAuthMethod;
  /** token.*: a client assertion's `jti` (not the token's: that is the `jti` column). */
  assertion_jti?: string;
  /** token.* by workload identity: the workload token's `iss`. */
  issuer?: string;
}

export interface AuditEvent {
  id: string;
  /** Milliseconds since the epoch. */
  at: number;
  type: EventType;
  agentId: string | null;
  platformId: string | null;
  kid: string | null;
  jti: string | null;
  actor: string | null;
  clientAddress: string | null;
  data: EventData | null;
}

/** The one actor of the admin API: whoever holds ADMIN_TOKEN (the token itself is never recorded). */
export const ADMIN_ACTOR = 'admin';
/** Changes the service makes by itself (scheduled key rotation). */
export const SCHEDULER_ACTOR = 'scheduler';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
// Ids from requests may be in forms the uuid column refuses ("urn:uuid:…"): such an id is left out
// rather than let one odd request fail a whole batch.
const uuidOrNull = (value: string | null | undefined) => (value && UUID.test(value) ? value : null);
const capped = (value: string | null | undefined, max: number) => (value ? value.slice(0, max) : null);

/**
 * Characters that do not show as themselves: C0/C1 controls and DEL, bidirectional controls (U+061C,
 * U+200E/200F, U+202A–202E, U+2066–2069), zero-width and invisible ones (U+200B–200D, U+2060–2065, U+FEFF),
 * the line and paragraph separators. The same class as src/support/unsafe-text.ts (which the core may not
 * import; test/in-process/unsafe-text.test.ts keeps the two equal).
 */
export const UNSAFE_TEXT_CHARACTERS = '\\u0000-\\u001F\\u007F-\\u009F\\u061C\\u200B-\\u200F\\u2028-\\u202E\\u2060-\\u2069\\uFEFF';
// Lone surrogates as well: Postgres refuses them in jsonb, which would fail the whole batch.
const UNSAFE_TEXT = new RegExp(`[${UNSAFE_TEXT_CHARACTERS}]|[\\uD800-\\uDBFF](?![\\uDC00-\\uDFFF])|(?<![\\uD800-\\uDBFF])[\\uDC00-\\uDFFF]`, 'g');
/**
 * The longest claimed value kept: an `iss` or `sub` as long as a registered workload issuer or subject may be
 * (512), a `jti` as long as a private_key_jwt's may be (256), a `kid` or an api_key_id as long as a client
 * key's `kid` may be (128). Verified values therefore come out whole.
 */
export const CLAIMED_MAX = { name: 512, jti: 256, id: 128 } as const;

/**
 * A value a client sent (a claim of an assertion it may have forged, an id it presented): every character
 * that would not show as itself becomes U+FFFD (so a forged "trusted.example\u200B" does not read as the real
 * one), and it is cut to `max` characters, the last one "…" when cut. Never a whole assertion: only claims.
 */
export function claimedText(value: string | undefined, max: number): string | undefined {
  if (value === undefined || value === '') return undefined;
  const cut = value.length > max ? `${value.slice(0, max - 1)}…` : value;
  // Cutting may split a surrogate pair: the cleaning runs after it.
  return cut.replace(UNSAFE_TEXT, '\uFFFD');
}

/** What a token event says of how the client authenticated (claimed values cleaned and bounded). */
function authenticationData(by: ClientAuthentication | undefined): EventData {
  if (!by) return {};
  const data: EventData = { auth_method: by.method };
  const put = (key: 'api_key_id' | 'client_kid' | 'assertion_jti' | 'issuer' | 'issuer_id' | 'subject', value: string | undefined, max: number) => {
    const clean = claimedText(value, max);
    if (clean !== undefined) data[key] = clean;
  };
  put('api_key_id', by.apiKeyId, CLAIMED_MAX.id);
  put('client_kid', by.clientKid, CLAIMED_MAX.id);
  put('assertion_jti', by.assertionJti, CLAIMED_MAX.jti);
  put('issuer', by.issuer, CLAIMED_MAX.name);
  put('issuer_id', by.issuerId, CLAIMED_MAX.id);
  put('subject', by.subject, CLAIMED_MAX.name);
  return data;
}

function event(type: EventType, fields: Partial<Omit<AuditEvent, 'id' | 'at' | 'type'>>): AuditEvent {
  return {
    id: randomUUID(),
    at: Date.now(),
    type,
    agentId: uuidOrNull(fields.agentId),
    platformId: uuidOrNull(fields.platformId),
    kid: capped(fields.kid, 128),
    jti: uuidOrNull(fields.jti),
    actor: capped(fields.actor, 64),
    clientAddress: capped(fields.clientAddress, 64),
    data: fields.data && Object.keys(fields.data).length > 0 ? fields.data : null,
  };
}

export const auditEvents = {
  /**
   * `by`: how the client authenticated (verified). `kid` is the signing key's, `jti` the token's. Its
   * api_key_id is left out: the agent's own, so `agent_id` says it (about 60 bytes less on every row).
   */
  tokenIssued(i: { jti: string; agentId: string; platformId: string; scope: string; kid: string; clientAddress: string; by: ClientAuthentication }): AuditEvent {
    const { apiKeyId: _sameAsTheAgents, ...by } = i.by;
    return event('token.issued', {
      jti: i.jti,
      agentId: i.agentId,
      platformId: i.platformId,
      kid: i.kid,
      clientAddress: i.clientAddress,
      data: { scope: i.scope, ...authenticationData(by) },
    });
  },
  /**
   * A refused credential check. `by`: how the client tried to authenticate, as far as it is known when it
   * is refused (what it claimed, unverified, unless the refusal came after the check).
   */
  tokenRefused(i: { errorCode: string; agentId?: string; platformId?: string; clientAddress: string; by?: ClientAuthentication }): AuditEvent {
    return event('token.refused', {
      agentId: i.agentId,
      platformId: i.platformId,
      clientAddress: i.clientAddress,
      data: { error_code: i.errorCode, ...authenticationData(i.by) },
    });
  },
  /**
   * Credential refusals past the per-address or per-agent bound of a window, counted instead of recorded
   * one by one: from one client address (`clientAddress`), or concerning one agent (`agentId`), or, with
   * neither, from addresses beyond the number the process tracks.
   */
  refusalsAggregated(i: { clientAddress?: string; agentId?: string; refusals: number; errorCodes: Record<string, number>; windowStart: number; windowSeconds: number }): AuditEvent {
    return event('token.refusals_aggregated', {
      agentId: i.agentId,
      clientAddress: i.clientAddress,
      data: { refusals: i.refusals, error_codes: i.errorCodes, window_start: new Date(i.windowStart).toISOString(), window_seconds: i.windowSeconds },
    });
  },
  listingServed(i: { agentId: string; clientAddress: string }): AuditEvent {
    return event('listing.served', { agentId: i.agentId, clientAddress: i.clientAddress });
  },
  /** An admin change: the ids it concerns and the names of the fields it set. */
  adminChange(
    type: Extract<EventType, `agent.${string}` | `grant.${string}` | `platform.${string}` | `key.${string}` | `feed_credential.${string}` | `workload_${string}`>,
    i: {
      actor: string;
      clientAddress: string;
      agentId?: string;
      platformId?: string;
      kid?: string;
      fields?: string[];
      scopes?: string[];
      graceSeconds?: number;
      status?: string;
      feedCredentialId?: string;
      clientKid?: string;
      issuerId?: string;
      subject?: string;
    },
  ): AuditEvent {
    const data: EventData = {};
    if (i.clientKid) data.client_kid = i.clientKid;
    if (i.issuerId) data.issuer_id = i.issuerId;
    if (i.subject) data.subject = i.subject;
    if (i.feedCredentialId) data.feed_credential_id = i.feedCredentialId;
    if (i.fields) data.fields = [...i.fields].sort();
    if (i.scopes) data.scopes = i.scopes;
    if (i.graceSeconds !== undefined) data.grace_seconds = i.graceSeconds;
    if (i.status) data.status = i.status;
    return event(type, { actor: i.actor, clientAddress: i.clientAddress, agentId: i.agentId, platformId: i.platformId, kid: i.kid, data });
  },
  adminAuthFailed(i: { clientAddress: string; method: string; path: string }): AuditEvent {
    // The path names the attempted resource; the presented token is never recorded.
    return event('admin.auth_failed', { clientAddress: i.clientAddress, data: { request: `${i.method} ${i.path.slice(0, 200)}` } });
  },
};

/**
 * Who made an admin change (for its event, written in the change's unit of work): the actor, the
 * request's client address and, when the caller knows them in its own terms, the names of the fields set.
 */
export interface ChangeBy {
  actor: string;
  clientAddress: string;
  fields?: string[];
}

/** Where events go. `record` resolves once the event is durable (Postgres or the local spool). */
export interface AuditSink {
  record(event: AuditEvent): Promise<void>;
  /** Fire and forget: the event is recorded in the next batch; a failure is counted and logged. */
  emit(event: AuditEvent): void;
}

/** When the trail is switched off (AUDIT=off): nothing is recorded. */
export const NO_AUDIT: AuditSink = {
  record: () => Promise.resolve(),
  emit: () => {},
};
