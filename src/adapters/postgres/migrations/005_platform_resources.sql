-- A platform's resource identifiers (RFC 8707 / RFC 9728: the URIs its servers answer as), in the normal
-- form the service computes. Read and written with the platform (the `resources` column); the table
-- platform_resources mirrors the column, one row per identifier, so that Postgres itself refuses an
-- identifier another platform holds (its primary key), whatever writes race.
ALTER TABLE platforms ADD COLUMN resources text[] NOT NULL DEFAULT '{}';

CREATE TABLE platform_resources (
  resource    text PRIMARY KEY,
  platform_id uuid NOT NULL REFERENCES platforms (id) ON DELETE CASCADE
);
CREATE INDEX platform_resources_platform_id_idx ON platform_resources (platform_id);

CREATE FUNCTION platform_resources_mirror() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND NEW.resources IS NOT DISTINCT FROM OLD.resources THEN
    RETURN NEW;
  END IF;
  DELETE FROM platform_resources WHERE platform_id = NEW.id;
  INSERT INTO platform_resources (resource, platform_id) SELECT DISTINCT r, NEW.id FROM unnest(NEW.resources) AS r;
  RETURN NEW;
END
$$;
CREATE TRIGGER platform_resources_mirror AFTER INSERT OR UPDATE OF resources ON platforms
  FOR EACH ROW EXECUTE FUNCTION platform_resources_mirror();

-- A verified domain names one platform (resource=https://<domain>): two platforms verified for the same
-- domain (in any case) would make the token endpoint pick one. Platforms that already share one are set
-- back to pending, all of them, so that none is picked until an operator verifies the right one again.
UPDATE platforms SET verification_status = 'pending', updated_at = now()
WHERE verification_status = 'verified' AND domain IS NOT NULL AND lower(domain) IN (
  SELECT lower(domain) FROM platforms WHERE verification_status = 'verified' AND domain IS NOT NULL
  GROUP BY lower(domain) HAVING count(*) > 1
);
CREATE UNIQUE INDEX platforms_verified_domain_idx ON platforms (lower(domain)) WHERE verification_status = 'verified';
