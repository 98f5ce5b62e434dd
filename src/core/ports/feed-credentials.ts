// Storage of the revocation feed's credentials: per platform, the SHA-256 of each feed
// token (the token itself is never stored). Postgres implements it in adapters/postgres/feed-credential-store.ts
// (migration 004_feed_credentials.sql); test/support/memory/ has an in-memory one.

/** A feed credential as listed: no token, no hash. */
export interface FeedCredential {
  id: string;
  platformId: string;
  createdAt: Date;
}

/** A credential with its token's SHA-256 (hex): what the verifier compares against. */
export interface FeedCredentialRecord extends FeedCredential {
  tokenHash: string;
}

/** The writes of an admin change (inside its unit of work). */
export interface FeedCredentialWrites {
  insertFeedCredential(row: FeedCredentialRecord): Promise<void>;
  /** false: no such credential on this platform. */
  deleteFeedCredential(platformId: string, id: string): Promise<boolean>;
  listFeedCredentials(platformId: string): Promise<FeedCredential[]>;
}

/** Reads outside a change. */
export interface FeedCredentialStore {
  listFeedCredentials(platformId: string): Promise<FeedCredential[]>;
  /** Every credential of every platform with its hash (the in-process index of the verifier). */
  allFeedCredentials(): Promise<FeedCredentialRecord[]>;
  /** One platform's credentials with their hashes (reloaded after a change). */
  feedCredentialsOf(platformId: string): Promise<FeedCredentialRecord[]>;
}
