-- Single use of client assertions (private_key_jwt `jti`), durably and across instances: one row per
-- assertion used, until it could no longer be accepted (its exp + the clock tolerance), then pruned. The key
-- is a SHA-256 of the issuer and the jti (the client chooses the jti: a bounded key whatever it sent).
CREATE TABLE used_assertion_jtis (
  id_digest  bytea PRIMARY KEY,
  expires_at timestamptz NOT NULL
);
CREATE INDEX used_assertion_jtis_expires_idx ON used_assertion_jtis (expires_at);
