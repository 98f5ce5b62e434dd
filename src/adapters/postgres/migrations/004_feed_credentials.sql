-- Revocation feed credentials (issue #26, 5e): who may read a platform's feed. Only the SHA-256 of each
-- feed token is stored (a 32-byte random token: a fast hash is right); the token is shown once, at creation.
-- Several per platform (rotation: add the new one, deploy it, delete the old one).
CREATE TABLE feed_credentials (
  id          uuid PRIMARY KEY,
  platform_id uuid NOT NULL REFERENCES platforms (id) ON DELETE CASCADE,
  token_hash  bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX feed_credentials_platform_idx ON feed_credentials (platform_id);
