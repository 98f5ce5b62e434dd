-- Agents without secrets: an agent that authenticates with private_key_jwt (RFC 7523) has one row here with
-- its public keys (a JWK array) or its jwks_uri; trusted workload identity issuers, and the (issuer, subject)
-- pairs bound to agents. Only public keys are stored.
CREATE TABLE agent_client_keys (
  agent_id   uuid PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
  jwks       jsonb,
  jwks_uri   text,
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((jwks IS NULL) <> (jwks_uri IS NULL))
);

CREATE TABLE workload_issuers (
  id         uuid PRIMARY KEY,
  issuer     text NOT NULL UNIQUE,
  audience   text NOT NULL,
  jwks       jsonb,
  jwks_uri   text,
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((jwks IS NULL) <> (jwks_uri IS NULL))
);

CREATE TABLE workload_bindings (
  issuer_id  uuid NOT NULL REFERENCES workload_issuers (id) ON DELETE CASCADE,
  subject    text NOT NULL,
  agent_id   uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (issuer_id, subject)
);
CREATE INDEX workload_bindings_agent_idx ON workload_bindings (agent_id);
