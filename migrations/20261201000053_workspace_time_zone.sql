-- A workspace's own time zone (issue 33): an automation's "wait until Monday 09:00" that names
-- no zone falls in it, for every reader without a zone of their own. 'UTC' until an admin
-- chooses one in Settings.
ALTER TABLE tenants ADD COLUMN time_zone text NOT NULL DEFAULT 'UTC' CHECK (length(time_zone) BETWEEN 1 AND 64);

-- As in migration 49, with the fallback widened: the reader's zone field, else the step's zone,
-- else the workspace's. A zone Postgres does not know (in the reader's field) is skipped; the
-- step's and the workspace's are checked when they are saved.
CREATE OR REPLACE FUNCTION automation_step_due(p_step jsonb, p_base timestamptz, p_tenant uuid, p_reader bigint)
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
DECLARE
    zone text;
BEGIN
    IF p_step->'action'->>'kind' IS DISTINCT FROM 'wait_until' THEN
        RETURN automation_step_due(p_step, p_base);
    END IF;
    IF coalesce(p_step->'action'->>'zone_field', '') <> '' THEN
        SELECT nullif(trim(r.attributes->>(p_step->'action'->>'zone_field')), '') INTO zone
        FROM readers r WHERE r.tenant_id = p_tenant AND r.id = p_reader;
    END IF;
    IF zone IS NOT NULL THEN
        BEGIN
            RETURN automation_next_local_time(p_step->'action', p_base, zone);
        EXCEPTION WHEN invalid_parameter_value THEN
            NULL;  -- not a zone Postgres knows: the step's or the workspace's, below
        END;
    END IF;
    zone := nullif(trim(coalesce(p_step->'action'->>'zone', '')), '');
    IF zone IS NULL THEN
        SELECT t.time_zone INTO zone FROM tenants t WHERE t.id = p_tenant;
    END IF;
    RETURN automation_next_local_time(p_step->'action', p_base, coalesce(zone, 'UTC'));
END $$;
