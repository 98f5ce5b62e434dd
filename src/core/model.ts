// The records the service keeps: agents, grants, platforms, secret hashes, signing keys. Plain data, no
// behaviour; the ports (ports/) say how they are read and written.

export type AgentStatus = 'active' | 'inactive';
export type PlatformStatus = 'active' | 'suspended' | 'disabled';
export type VerificationStatus = 'pending' | 'verified' | 'failed';

export interface ScopeDefinition {
  name: string;
  description: string;
}

export interface RouteRule {
  method: string;
  path: string;
  scopes: string[];
}

/** A stored platform: what was given (PlatformInput) plus its id and times. */
export interface PlatformRecord extends PlatformInput {
  id: string;
  createdAt: string;
  updatedAt: string;
}

export interface AgentRecord {
  id: string;
  name: string;
  status: AgentStatus;
  apiKeyId: string;
  createdAt: string;
  updatedAt: string;
}

export interface GrantRecord {
  agentId: string;
  platformId: string;
  scopes: string[];
  updatedAt: string;
}

/**
 * What the token path needs about an agent, in one read: status and every grant with its platform's
 * status. Holds no secret material, so it may be cached in Redis.
 */
export interface AgentView {
  agentId: string;
  apiKeyId: string;
  status: AgentStatus;
  grants: Record<string, { scopes: string[]; platformStatus: PlatformStatus }>;
}

/** Secret hashes of an agent: read from Postgres only, never cached outside the process. */
export interface SecretHashes {
  agentId: string;
  current: string;
  /** The previous secret's hash while its grace period lasts. */
  previous: string | null;
  previousExpiresAt: Date | null;
}

export interface SigningKeyRow {
  kid: string;
  publicJwk: { kty: 'RSA'; n: string; e: string };
  /** AES-256-GCM ciphertext of the PKCS#8 PEM, base64 (iv | tag | data). */
  privateKeyEncrypted: string;
  createdAt: Date;
  activatesAt: Date;
  retiredAt: Date | null;
}

export interface PlatformInput {
  name: string;
  domain: string | null;
  status: PlatformStatus;
  verificationStatus: VerificationStatus;
  scopes: ScopeDefinition[];
  routes: RouteRule[];
  /**
   * The resource identifiers the platform's servers answer as (RFC 8707 / RFC 9728), in normal form
   * (the protocol package's resource-identifier); each belongs to one platform only.
   */
  resources: string[];
}

/**
 * What a cold credential check reads, in one round trip: the hashes to verify and the agent's view to use
 * once they match.
 */
export interface AgentCredentials {
  hashes: SecretHashes;
  view: AgentView;
  /**
   * Set by a caching store when it read these: its invalidation count and the time. `getAgentView` takes
   * this view only while an in-process cache entry read then would still be served (nothing invalidated
   * since, younger than its TTL); otherwise it reads the view again.
   */
  cacheStamp?: { generation: number; at: number };
}
