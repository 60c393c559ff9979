-- Readers' custom field values, kept typed and indexed by triggers on readers and fields, and
-- the readers search (engine/src/audience/).
--
-- The one current text of these functions and triggers: `herald migrate` applies this file
-- after the schema migrations when it has changed. Edit here, never in a migration (a
-- changed signature needs its DROP FUNCTION in a migration first). See docs/database.md.

-- 1. The typed value of one field, as the side table stores it: a number as a JSON number, a
--    yes/no as a JSON boolean, a choice as its JSON string (the 100 characters a choice may have:
--    longer is no choice, and a B-tree entry must stay small), a date (ISO day) as the JSON number
--    YYYYMMDD, so ranges compare as numbers whatever the database's collation. NULL — no row —
--    for a value of another type (an attribute written before its field was made).
-- STABLE, as `to_jsonb` is: declared IMMUTABLE it would not be inlined, and a call costs 9 µs.
CREATE OR REPLACE FUNCTION field_value_of(kind text, value jsonb)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT CASE
        WHEN kind = 'number' AND jsonb_typeof(value) = 'number' THEN value
        WHEN kind = 'yes_no' AND jsonb_typeof(value) = 'boolean' THEN value
        WHEN kind = 'choice' AND jsonb_typeof(value) = 'string' AND char_length(value #>> '{}') <= 100 THEN value
        WHEN kind = 'date' AND jsonb_typeof(value) = 'string' AND value #>> '{}' ~ '^\d{4}-\d{2}-\d{2}$'
            THEN to_jsonb(replace(value #>> '{}', '-', '')::numeric)
    END
$function$;

-- A field made while a reader's attributes change: the field's backfill reads the readers as
-- they were when it started, and the reader's trigger does not see a field not yet committed,
-- so the new value would be lost. Writers of readers hold this lock shared for their
-- workspaces and the field's backfill holds it alone: one waits for the other.
CREATE OR REPLACE FUNCTION field_values_lock(tenant uuid)
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ SELECT hashtextextended('field_values:' || tenant::text, 0) $function$;

-- A reader whose attributes changed: row by row, so an update that leaves them alone (a status,
-- `updated_at`) costs nothing (a statement trigger joining the old and new rows cost 17 µs a
-- row for those).
CREATE OR REPLACE FUNCTION field_values_of_changed_reader()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(field_values_lock(NEW.tenant_id));
    DELETE FROM field_values WHERE tenant_id = NEW.tenant_id AND reader_id = NEW.id;
    INSERT INTO field_values (tenant_id, reader_id, field_key, value)
    SELECT NEW.tenant_id, NEW.id, f.key, x.value
    FROM fields f CROSS JOIN LATERAL (SELECT field_value_of(f.kind, NEW.attributes -> f.key) AS value) x
    WHERE f.tenant_id = NEW.tenant_id AND f.kind <> 'text' AND NEW.attributes ? f.key AND x.value IS NOT NULL;
    RETURN NULL;
END $function$;

-- A field's kind and key never change: a deleted field's values go, a new field takes the values
-- its key already holds (attributes written before it was made).
CREATE OR REPLACE FUNCTION field_values_of_deleted_field()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
BEGIN
    DELETE FROM field_values WHERE tenant_id = OLD.tenant_id AND field_key = OLD.key;
    RETURN NULL;
END $function$;

-- Deleted readers (erasure, a workspace's deletion) take their values with them.
CREATE OR REPLACE FUNCTION field_values_of_deleted_readers()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
BEGIN
    DELETE FROM field_values v USING old_rows o WHERE v.tenant_id = o.tenant_id AND v.reader_id = o.id;
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION field_values_of_new_field()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
BEGIN
    IF NEW.kind = 'text' THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(field_values_lock(NEW.tenant_id));
    INSERT INTO field_values (tenant_id, reader_id, field_key, value)
    SELECT r.tenant_id, r.id, NEW.key, x.value
    FROM readers r CROSS JOIN LATERAL (SELECT field_value_of(NEW.kind, r.attributes -> NEW.key) AS value) x
    WHERE r.tenant_id = NEW.tenant_id AND r.attributes ? NEW.key AND x.value IS NOT NULL;
    RETURN NULL;
END $function$;

-- Runs as the system role (`migrate::grant_system_role` makes it the owner): some writers of
-- readers write many workspaces in one statement.
CREATE OR REPLACE FUNCTION field_values_of_new_readers()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(field_values_lock(t.tenant_id))
    FROM (SELECT DISTINCT n.tenant_id FROM new_rows n ORDER BY 1) t;
    INSERT INTO field_values (tenant_id, reader_id, field_key, value)
    SELECT n.tenant_id, n.id, f.key, x.value
    FROM new_rows n
    JOIN fields f ON f.tenant_id = n.tenant_id AND f.kind <> 'text' AND n.attributes ? f.key
    CROSS JOIN LATERAL (SELECT field_value_of(f.kind, n.attributes -> f.key) AS value) x
    WHERE x.value IS NOT NULL;
    RETURN NULL;
END $function$;

-- 2. Reader search that can use its indexes. Under FORCEd row-level security the planner may
--    only use an index for a condition whose operator is leakproof; LIKE and jsonb `@>` are not,
--    so the policy check ran first and a rare search term scanned the whole workspace (~1 s).
--    This function runs as the tables' owner, outside RLS, and so applies the same tenant rule
--    itself: it reads the tenant only from the transaction's app.tenant_id, never from an
--    argument, so a caller cannot reach another workspace through it. The query text is built
--    only from fixed fragments; every value is a bound parameter.
--    A term matching many readers ("gmail") would make the trigram path fetch and sort every
--    match, while the newest page sits in the first few thousand rows by id. So a page is looked
--    for first in a bounded window of the newest rows (by the id index, newest first): if the
--    window holds a whole page, those are exactly the newest matches, since every newer row was
--    examined; otherwise the rest comes from the indexed query below the window. Unpaged calls
--    (p_limit NULL: bulk actions and export over a whole filter) skip the window.
CREATE OR REPLACE FUNCTION search_readers(p_search text, p_status text, p_list uuid, p_attributes jsonb[], p_before bigint, p_limit integer, p_tag text DEFAULT NULL::text)
 RETURNS SETOF readers
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
DECLARE
    tenant uuid := app_tenant_id();
    cond text := '';
    window_rows constant int := 5000;
    found int;
BEGIN
    IF tenant IS NULL THEN
        RETURN;
    END IF;
    IF p_search IS NOT NULL THEN
        cond := cond || ' AND (lower(r.email) || '' '' || lower(r.name)) LIKE $2';
    END IF;
    IF p_status IS NOT NULL THEN
        cond := cond || ' AND r.status = $3';
    END IF;
    IF p_list IS NOT NULL THEN
        cond := cond || ' AND EXISTS (SELECT 1 FROM subscriptions s WHERE s.tenant_id = $1 AND s.list_id = $4'
                     || ' AND s.reader_id = r.id AND s.status <> ''unsubscribed'')';
    END IF;
    IF cardinality(p_attributes) > 0 THEN
        cond := cond || ' AND (' || (
            SELECT string_agg(format('r.attributes @> $5[%s]', i), ' OR ')
            FROM generate_series(1, cardinality(p_attributes)) i
        ) || ')';
    END IF;
    IF p_tag IS NOT NULL THEN
        cond := cond || ' AND EXISTS (SELECT 1 FROM reader_tags rt JOIN tags t ON t.tenant_id = rt.tenant_id AND t.id = rt.tag_id'
                     || ' WHERE rt.tenant_id = $1 AND rt.reader_id = r.id AND lower(t.name) = lower($9))';
    END IF;

    IF p_limit IS NOT NULL AND cond <> '' THEN
        -- The window: the newest `window_rows` readers before the cursor, filtered.
        RETURN QUERY EXECUTE
            'SELECT r.* FROM (SELECT * FROM readers w WHERE w.tenant_id = $1'
            || CASE WHEN p_before IS NOT NULL THEN ' AND w.id < $6' ELSE '' END
            || ' ORDER BY w.id DESC LIMIT ' || window_rows || ') r WHERE true' || cond
            || ' ORDER BY r.id DESC LIMIT $7'
            USING tenant, p_search, p_status, p_list, p_attributes, p_before, p_limit, NULL::bigint, p_tag;
        GET DIAGNOSTICS found = ROW_COUNT;
        IF found >= p_limit THEN
            RETURN;
        END IF;
        -- Part of a page: those rows stay in the result (RETURN QUERY appends), and the rest
        -- are the newest matches below the window, from the indexed query.
        IF found > 0 THEN
            RETURN QUERY EXECUTE
                'SELECT r.* FROM readers r WHERE r.tenant_id = $1 AND r.id < $8' || cond
                || ' ORDER BY r.id DESC LIMIT $7'
                USING tenant, p_search, p_status, p_list, p_attributes, p_before, p_limit - found,
                      (SELECT min(id) FROM (SELECT w.id FROM readers w WHERE w.tenant_id = tenant
                          AND (p_before IS NULL OR w.id < p_before) ORDER BY w.id DESC LIMIT window_rows) x),
                      p_tag;
            RETURN;
        END IF;
    END IF;

    RETURN QUERY EXECUTE
        'SELECT r.* FROM readers r WHERE r.tenant_id = $1' || cond
        || CASE WHEN p_before IS NOT NULL THEN ' AND r.id < $6' ELSE '' END
        || ' ORDER BY r.id DESC' || CASE WHEN p_limit IS NOT NULL THEN ' LIMIT $7' ELSE '' END
        USING tenant, p_search, p_status, p_list, p_attributes, p_before, p_limit, NULL::bigint, p_tag;
END $function$;
REVOKE ALL ON FUNCTION search_readers(text,text,uuid,jsonb[],bigint,integer,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION search_readers(text,text,uuid,jsonb[],bigint,integer,text) TO herald_app;

-- Triggers

CREATE OR REPLACE TRIGGER fields_field_values_delete AFTER DELETE ON fields FOR EACH ROW EXECUTE FUNCTION field_values_of_deleted_field();

CREATE OR REPLACE TRIGGER fields_field_values_insert AFTER INSERT ON fields FOR EACH ROW EXECUTE FUNCTION field_values_of_new_field();

CREATE OR REPLACE TRIGGER readers_field_values_delete AFTER DELETE ON readers REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION field_values_of_deleted_readers();

CREATE OR REPLACE TRIGGER readers_field_values_insert AFTER INSERT ON readers REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION field_values_of_new_readers();

CREATE OR REPLACE TRIGGER readers_field_values_update AFTER UPDATE OF attributes ON readers FOR EACH ROW WHEN ((old.attributes IS DISTINCT FROM new.attributes)) EXECUTE FUNCTION field_values_of_changed_reader();
