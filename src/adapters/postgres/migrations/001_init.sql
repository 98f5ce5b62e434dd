-- Platforms carry their scope catalogue and route rules as JSON: they are read and written whole.
CREATE TABLE platforms (
  id                  uuid PRIMARY KEY,
  name                text NOT NULL,
  domain              text,
  status              text NOT NULL CHECK (status IN ('active', 'suspended', 'disabled')),
  verification_status text NOT NULL CHECK (verification_status IN ('pending', 'verified', 'failed')),
  scopes              jsonb NOT NULL DEFAULT '[]',
  routes              jsonb NOT NULL DEFAULT '[]',
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now()
);

-- Secrets are stored only as argon2id hashes. During a rotation grace period the previous hash stays
-- valid until previous_secret_expires_at.
CREATE TABLE agents (
  id                         uuid PRIMARY KEY,
  name                       text NOT NULL,
  status                     text NOT NULL CHECK (status IN ('active', 'inactive')),
  api_key_id                 text NOT NULL UNIQUE,
  secret_hash                text NOT NULL,
  previous_secret_hash       text,
  previous_secret_expires_at timestamptz,
  created_at                 timestamptz NOT NULL DEFAULT now(),
  updated_at                 timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE grants (
  agent_id    uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  platform_id uuid NOT NULL REFERENCES platforms (id) ON DELETE CASCADE,
  scopes      text[] NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, platform_id)
);
CREATE INDEX grants_platform_id_idx ON grants (platform_id);

-- A key is published from created_at, signs from activates_at (the newest key past its activation),
-- and leaves the key set when retired_at is set or its successor has been active for the token
-- lifetime plus clock skew (computed by the service). The private key is AES-256-GCM encrypted.
CREATE TABLE signing_keys (
  kid                   text PRIMARY KEY,
  public_jwk            jsonb NOT NULL,
  private_key_encrypted text NOT NULL,
  created_at            timestamptz NOT NULL DEFAULT now(),
  activates_at          timestamptz NOT NULL,
  retired_at            timestamptz
);
