-- Revocation feed: per platform, an ordered list of "tokens like these are void" entries. Each platform
-- has its own sequence (revocation_heads.seq); the row lock on the head serialises writers of one
-- platform, so sequence order is commit order and a reader resuming "since N" never misses an entry.
CREATE TABLE revocation_heads (
  platform_id uuid PRIMARY KEY REFERENCES platforms (id) ON DELETE CASCADE,
  seq         bigint NOT NULL
);

-- kind 'agent': tokens of agent_id for this platform with iat <= iat_max are void.
-- kind 'platform': every token for this platform with iat <= iat_max is void.
-- kind 'key': every token signed with kid is void.
-- An entry is deleted after expires_at: by then every token it could affect has expired.
CREATE TABLE revocation_entries (
  platform_id uuid NOT NULL REFERENCES platforms (id) ON DELETE CASCADE,
  seq         bigint NOT NULL,
  kind        text NOT NULL CHECK (kind IN ('agent', 'platform', 'key')),
  agent_id    uuid,
  kid         text,
  iat_max     bigint,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (platform_id, seq)
);
CREATE INDEX revocation_entries_expires_at_idx ON revocation_entries (expires_at);
