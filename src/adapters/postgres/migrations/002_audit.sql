-- The audit trail: one row per credential event, partitioned by day (declarative range partitioning on
-- `at`) so that retention drops whole partitions instead of deleting rows. The service generates `id`
-- and `at` before the first write attempt, so a retried batch or a replayed spool file carries the same
-- (at, id) and `ON CONFLICT DO NOTHING` keeps exactly one copy. Partitions for each day are created by
-- the service (see src/adapters/audit-trail/maintenance.ts); the default partition catches anything outside them.
CREATE TABLE audit_events (
  id             uuid        NOT NULL,
  at             timestamptz NOT NULL,
  type           text        NOT NULL,
  agent_id       uuid,
  platform_id    uuid,
  kid            text,
  jti            uuid,
  actor          text,
  client_address text,
  -- Type-specific, never secret: scope, error_code, api_key_id, changed field names.
  data           jsonb,
  PRIMARY KEY (at, id)
) PARTITION BY RANGE (at);

CREATE TABLE audit_events_default PARTITION OF audit_events DEFAULT;

-- Reading by agent or platform over a time range ("which tokens did this agent get?").
CREATE INDEX audit_events_agent_idx ON audit_events (agent_id, at) WHERE agent_id IS NOT NULL;
CREATE INDEX audit_events_platform_idx ON audit_events (platform_id, at) WHERE platform_id IS NOT NULL;
