// Storage interface of the revocation feed (see src/core/revocation/). Postgres implements it in
// adapters/postgres/revocation-store.ts; domain code depends only on this file.

export type RevocationKind = 'agent' | 'platform' | 'key';

/** What to revoke, before it has a platform and a sequence number. */
export type RevocationTarget =
  | { kind: 'agent'; agentId: string; platformIds: string[]; iatMax: number }
  | { kind: 'platform'; platformId: string; iatMax: number }
  /** A key entry goes into the feed of every platform. */
  | { kind: 'key'; kid: string };

export interface RevocationEntry {
  platformId: string;
  seq: number;
  kind: RevocationKind;
  agentId: string | null;
  kid: string | null;
  /** Tokens with iat <= iatMax are void (agent and platform entries). */
  iatMax: number | null;
  createdAt: Date;
  expiresAt: Date;
}

/** The revocation log as the feed reads it; entries are appended only in a unit of work (RevocationAppender). */
export interface RevocationStore extends RevocationStoreQueries {
  /** Live entries of a platform with seq > since, in order, and the platform's head sequence. */
  since(platformId: string, since: number, now: Date): Promise<{ head: number; entries: RevocationEntry[] }>;
  /** Head sequences of the given platforms (0 for a platform that never had an entry). */
  heads(platformIds: string[]): Promise<Map<string, number>>;
  /** Deletes expired entries; returns how many are still live. */
  purgeExpired(now: Date): Promise<number>;
  /** Whether the platform exists (the feed of an unknown platform is a 404). */
  platformExists(platformId: string): Promise<boolean>;
}

export interface RevocationStoreQueries {
  /** Agents whose grant on the platform holds any of `scopes` (who loses something when they are dropped). */
  agentsHoldingScopes(platformId: string, scopes: string[]): Promise<string[]>;
}
