-- Issue 32: segment counts under 300 ms at 1M readers for the two conditions that missed it —
-- list membership (a list's subscriptions hash-joined with every reader of the workspace) and a
-- number or date range (every reader's JSON read, since no index can serve a typed range over
-- `attributes`) — and the pairs made with them.
--
-- Two changes:
-- 1. `field_values`: each reader's value of each number, date, yes/no and choice field, typed so
--    one B-tree answers equality and ranges (`(tenant_id, field_key, value, reader_id)`), kept
--    by triggers on `readers` and `fields`, so every writer of attributes keeps it.
-- 2. A count of an "all" group joins the reader-id sets its conditions name (a list's
--    subscriptions, a tag's readers, a field's values, the engagement summary) — each read from
--    an index that holds the reader id — and reads `readers` only when a condition needs the
--    reader's own row. A condition's id set is one fragment (`segment_ids`), used by the count's
--    join and by `segment_where`'s `r.id IN (…)` alike, so the count and the fan-out cannot
--    disagree about who matches.

-- 1. The typed value of one field, as the side table stores it: a number as a JSON number, a
--    yes/no as a JSON boolean, a choice as its JSON string (the 100 characters a choice may have:
--    longer is no choice, and a B-tree entry must stay small), a date (ISO day) as the JSON number
--    YYYYMMDD, so ranges compare as numbers whatever the database's collation. NULL — no row —
--    for a value of another type (an attribute written before its field was made).
-- STABLE, as `to_jsonb` is: declared IMMUTABLE it would not be inlined, and a call costs 9 µs.
CREATE FUNCTION field_value_of(kind text, value jsonb) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN kind = 'number' AND jsonb_typeof(value) = 'number' THEN value
        WHEN kind = 'yes_no' AND jsonb_typeof(value) = 'boolean' THEN value
        WHEN kind = 'choice' AND jsonb_typeof(value) = 'string' AND char_length(value #>> '{}') <= 100 THEN value
        WHEN kind = 'date' AND jsonb_typeof(value) = 'string' AND value #>> '{}' ~ '^\d{4}-\d{2}-\d{2}$'
            THEN to_jsonb(replace(value #>> '{}', '-', '')::numeric)
    END
$$;

CREATE TABLE field_values (
    tenant_id uuid NOT NULL,
    reader_id bigint NOT NULL,
    field_key text NOT NULL,
    value     jsonb NOT NULL,
    -- No foreign keys: only the triggers below write it, and they also remove a deleted
    -- reader's or field's rows. A key's check per row doubled the cost of writing it (200k
    -- rows: 1.2 s → 2.4 s), and an import of 1M readers with two number fields writes 2M.
    -- The key serves a reader's rows (rewritten when its attributes change, removed with it).
    PRIMARY KEY (tenant_id, reader_id, field_key)
);
-- A condition's readers: equality hands them back in id order (a merge join with a list's
-- subscriptions), a range as a slice of the index; a deleted field's rows.
CREATE INDEX field_values_value_idx ON field_values (tenant_id, field_key, value, reader_id);

ALTER TABLE field_values ENABLE ROW LEVEL SECURITY;
ALTER TABLE field_values FORCE ROW LEVEL SECURITY;
CREATE POLICY field_values_tenant ON field_values FOR ALL USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY field_values_system ON field_values FOR ALL TO herald_system USING (true) WITH CHECK (true);
-- Written only by the triggers below.
REVOKE INSERT, UPDATE, DELETE ON field_values FROM herald_app;

-- A field made while a reader's attributes change: the field's backfill reads the readers as
-- they were when it started, and the reader's trigger does not see a field not yet committed,
-- so the new value would be lost. Writers of readers hold this lock shared for their
-- workspaces and the field's backfill holds it alone: one waits for the other.
CREATE FUNCTION field_values_lock(tenant uuid) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT hashtextextended('field_values:' || tenant::text, 0) $$;

-- Runs as the system role (`migrate::grant_system_role` makes it the owner): some writers of
-- readers write many workspaces in one statement.
CREATE FUNCTION field_values_of_new_readers() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
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
END $$;
CREATE TRIGGER readers_field_values_insert AFTER INSERT ON readers
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION field_values_of_new_readers();

-- A reader whose attributes changed: row by row, so an update that leaves them alone (a status,
-- `updated_at`) costs nothing (a statement trigger joining the old and new rows cost 17 µs a
-- row for those).
CREATE FUNCTION field_values_of_changed_reader() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(field_values_lock(NEW.tenant_id));
    DELETE FROM field_values WHERE tenant_id = NEW.tenant_id AND reader_id = NEW.id;
    INSERT INTO field_values (tenant_id, reader_id, field_key, value)
    SELECT NEW.tenant_id, NEW.id, f.key, x.value
    FROM fields f CROSS JOIN LATERAL (SELECT field_value_of(f.kind, NEW.attributes -> f.key) AS value) x
    WHERE f.tenant_id = NEW.tenant_id AND f.kind <> 'text' AND NEW.attributes ? f.key AND x.value IS NOT NULL;
    RETURN NULL;
END $$;
CREATE TRIGGER readers_field_values_update AFTER UPDATE OF attributes ON readers
    FOR EACH ROW WHEN (OLD.attributes IS DISTINCT FROM NEW.attributes) EXECUTE FUNCTION field_values_of_changed_reader();

-- Deleted readers (erasure, a workspace's deletion) take their values with them.
CREATE FUNCTION field_values_of_deleted_readers() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    DELETE FROM field_values v USING old_rows o WHERE v.tenant_id = o.tenant_id AND v.reader_id = o.id;
    RETURN NULL;
END $$;
CREATE TRIGGER readers_field_values_delete AFTER DELETE ON readers
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION field_values_of_deleted_readers();

-- A field's kind and key never change: a deleted field's values go, a new field takes the values
-- its key already holds (attributes written before it was made).
CREATE FUNCTION field_values_of_deleted_field() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    DELETE FROM field_values WHERE tenant_id = OLD.tenant_id AND field_key = OLD.key;
    RETURN NULL;
END $$;
CREATE TRIGGER fields_field_values_delete AFTER DELETE ON fields
    FOR EACH ROW EXECUTE FUNCTION field_values_of_deleted_field();

CREATE FUNCTION field_values_of_new_field() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
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
END $$;
CREATE TRIGGER fields_field_values_insert AFTER INSERT ON fields
    FOR EACH ROW EXECUTE FUNCTION field_values_of_new_field();

-- The values already held (run while the owner holds the system role's view).
INSERT INTO field_values (tenant_id, reader_id, field_key, value)
SELECT r.tenant_id, r.id, f.key, x.value
FROM readers r
JOIN fields f ON f.tenant_id = r.tenant_id AND f.kind <> 'text' AND r.attributes ? f.key
CROSS JOIN LATERAL (SELECT field_value_of(f.kind, r.attributes -> f.key) AS value) x
WHERE x.value IS NOT NULL;

-- 2. A condition's reader-id set: the text of a query of one column, `reader_id`, naming each
--    matching reader of the workspace once, from a table whose rows exist only for the
--    workspace's readers; NULL when the condition needs the reader's row (a negation, a text
--    comparison, sign-up date, domain, a given campaign's sends, which repeat per edition). As
--    in `segment_where` (migration 41), every value is read from the bound tree ($2) by a path
--    of fixed keys, $1 is the workspace, ($3, $4] an optional chunk of reader ids.
CREATE FUNCTION segment_ids(node jsonb, path text[]) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = public, pg_temp AS $$
DECLARE
    kind text := node->>'kind';
    field_kind text;
    v text := format('($2 #>> %L)', (path || 'value'::text)::text);
    v2 text := format('($2 #>> %L)', (path || 'value2'::text)::text);
    days text := format('make_interval(days => ($2 #>> %L)::int)', (path || 'days'::text)::text);
    -- The field's values: the key is bound like a value.
    field_rows text := format('SELECT v.reader_id FROM field_values v WHERE v.tenant_id = $1 AND v.field_key = ($2 #>> %L)',
                              (path || 'key'::text)::text);
    number_of text := '(CASE WHEN %1$s ~ ''^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$'' THEN to_jsonb(%1$s::numeric) END)';
    day_of text := '(CASE WHEN %1$s ~ ''^\d{4}-\d{2}-\d{2}$'' THEN to_jsonb(replace(%1$s, ''-'', '''')::numeric) END)';
    day_ago text := 'to_jsonb(to_char(%s, ''YYYYMMDD'')::numeric)';
    chunk text := ' AND ($3::bigint IS NULL OR %1$s > $3) AND ($4::bigint IS NULL OR %1$s <= $4)';
BEGIN
    IF node ? 'match' OR node ? 'not' THEN
        RETURN NULL;
    END IF;
    CASE kind
    WHEN 'list' THEN
        IF coalesce(node->>'state', '') NOT IN ('subscribed', 'pending', 'unsubscribed', 'member') THEN
            RETURN NULL;
        END IF;
        -- The list's (list_id, status, reader_id) or (list_id, reader_id) index alone: the
        -- list is the workspace's (checked once), so its subscriptions are the workspace's
        -- readers without reading a row of them.
        RETURN format('SELECT s.reader_id FROM subscriptions s WHERE s.list_id = ($2 #>> %1$L)::uuid%2$s'
                      ' AND EXISTS (SELECT 1 FROM lists l WHERE l.tenant_id = $1 AND l.id = ($2 #>> %1$L)::uuid)%3$s',
                      (path || 'list_id'::text)::text,
                      CASE node->>'state' WHEN 'subscribed' THEN ' AND s.status = ''confirmed'''
                                          WHEN 'pending' THEN ' AND s.status = ''unconfirmed'''
                                          WHEN 'unsubscribed' THEN ' AND s.status = ''unsubscribed'''
                                          ELSE '' END,
                      format(chunk, 's.reader_id'));
    WHEN 'tag' THEN
        IF (node->>'has')::boolean IS DISTINCT FROM false THEN
            RETURN format('SELECT t.reader_id FROM reader_tags t WHERE t.tenant_id = $1 AND t.tag_id = ($2 #>> %L)::uuid%s',
                          (path || 'tag_id'::text)::text, format(chunk, 't.reader_id'));
        END IF;
        RETURN NULL;
    WHEN 'field' THEN
        SELECT f.kind INTO field_kind FROM fields f WHERE f.tenant_id = app_tenant_id() AND f.key = node->>'key';
        IF field_kind IS NULL OR field_kind = 'text' THEN
            RETURN NULL;
        END IF;
        field_rows := field_rows || format(chunk, 'v.reader_id');
        CASE node->>'op'
        WHEN 'eq' THEN
            RETURN CASE field_kind
                WHEN 'number' THEN field_rows || ' AND v.value = ' || format(number_of, v)
                WHEN 'date' THEN field_rows || ' AND v.value = ' || format(day_of, v)
                WHEN 'yes_no' THEN field_rows || format(' AND v.value = (CASE WHEN %1$s IN (''true'', ''false'') THEN to_jsonb(%1$s::boolean) END)', v)
                -- A choice longer than a choice may be is not in the table: compared in the JSON.
                WHEN 'choice' THEN CASE WHEN char_length(node->>'value') <= 100 THEN field_rows || ' AND v.value = to_jsonb(' || v || ')' END
            END;
        WHEN 'lt', 'before' THEN
            RETURN CASE field_kind WHEN 'number' THEN field_rows || ' AND v.value < ' || format(number_of, v)
                                   WHEN 'date' THEN field_rows || ' AND v.value < ' || format(day_of, v) END;
        WHEN 'gt', 'after' THEN
            RETURN CASE field_kind WHEN 'number' THEN field_rows || ' AND v.value > ' || format(number_of, v)
                                   WHEN 'date' THEN field_rows || ' AND v.value > ' || format(day_of, v) END;
        WHEN 'between' THEN
            RETURN CASE field_kind
                WHEN 'number' THEN field_rows || format(' AND v.value BETWEEN %s AND %s', format(number_of, v), format(number_of, v2))
                WHEN 'date' THEN field_rows || format(' AND v.value BETWEEN %s AND %s', format(day_of, v), format(day_of, v2)) END;
        WHEN 'within_last_days' THEN
            RETURN CASE field_kind WHEN 'date' THEN
                field_rows || format(' AND v.value BETWEEN %s AND %s', format(day_ago, 'current_date - ' || days), format(day_ago, 'current_date')) END;
        WHEN 'anniversary_within_days' THEN
            -- Month and day (MMDD, the number's last four digits) within the next N days; 29
            -- February only in leap years.
            RETURN CASE field_kind WHEN 'date' THEN
                field_rows || format(' AND v.value::numeric %% 10000 IN (SELECT to_char(current_date + g, ''MMDD'')::numeric'
                                     ' FROM generate_series(0, least(($2 #>> %L)::int, 366)) g)', (path || 'days'::text)::text) END;
        ELSE
            RETURN NULL;  -- ne, contains, starts_with, is_set, is_empty: the reader's JSON
        END CASE;
    WHEN 'opened', 'clicked' THEN
        IF jsonb_typeof(node->'campaign_id') = 'string' OR (node->>'did')::boolean IS NOT DISTINCT FROM false THEN
            RETURN NULL;
        END IF;
        RETURN format('SELECT e.reader_id FROM reader_engagement e WHERE e.tenant_id = $1 AND e.%s%s%s',
                      CASE kind WHEN 'opened' THEN 'last_open_at' ELSE 'last_click_at' END,
                      CASE WHEN node ? 'days' AND jsonb_typeof(node->'days') = 'number' THEN ' > now() - ' || days ELSE ' IS NOT NULL' END,
                      format(chunk, 'e.reader_id'));
    WHEN 'soft_bounced' THEN
        RETURN format('SELECT e.reader_id FROM reader_engagement e WHERE e.tenant_id = $1 AND e.last_soft_bounce_at > now() - %s%s',
                      days, format(chunk, 'e.reader_id'));
    ELSE
        RETURN NULL;
    END CASE;
END $$;
REVOKE ALL ON FUNCTION segment_ids(jsonb, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_ids(jsonb, text[]) TO herald_system;

-- The compiler of migration 41, with every condition that has an id set reading it.
CREATE OR REPLACE FUNCTION segment_where(node jsonb, path text[]) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = public, pg_temp AS $$
DECLARE
    children text;
    joined text;
    ids text := segment_ids(node, path);
    kind text := node->>'kind';
    field_kind text;
    v text;
    days text;
    recent text;
BEGIN
    IF ids IS NOT NULL THEN
        RETURN 'r.id IN (' || ids || ')';
    END IF;
    IF node ? 'match' THEN
        children := CASE WHEN node ? 'rules' THEN 'rules' ELSE 'conditions' END;
        SELECT string_agg('(' || segment_where(c, path || children || (i - 1)::text) || ')',
                          CASE WHEN node->>'match' = 'any' THEN ' OR ' ELSE ' AND ' END ORDER BY i)
        INTO joined
        FROM jsonb_array_elements(node->children) WITH ORDINALITY AS x(c, i);
        RETURN coalesce(joined, CASE WHEN node->>'match' = 'any' THEN 'false' ELSE 'true' END);
    END IF;
    IF node ? 'not' THEN
        RETURN 'NOT (' || segment_where(node->'not', path || 'not'::text) || ')';
    END IF;
    v := format('($2 #>> %L)', (path || 'value'::text)::text);
    days := format('make_interval(days => ($2 #>> %L)::int)', (path || 'days'::text)::text);
    CASE kind
    WHEN 'list' THEN
        IF node->>'state' = 'not_member' THEN
            RETURN format('NOT EXISTS (SELECT 1 FROM subscriptions s WHERE s.tenant_id = $1 AND s.list_id = ($2 #>> %L)::uuid'
                          ' AND s.reader_id = r.id)', (path || 'list_id'::text)::text);
        END IF;
        RETURN 'false';  -- an unknown state: nobody
    WHEN 'tag' THEN
        RETURN format('NOT EXISTS (SELECT 1 FROM reader_tags t WHERE t.tenant_id = $1 AND t.tag_id = ($2 #>> %L)::uuid AND t.reader_id = r.id)',
                      (path || 'tag_id'::text)::text);
    WHEN 'field' THEN
        SELECT f.kind INTO field_kind FROM fields f WHERE f.tenant_id = app_tenant_id() AND f.key = node->>'key';
        IF field_kind IS NULL THEN
            RETURN 'false';  -- the field was deleted: nobody has it
        END IF;
        DECLARE
            k text := format('($2 #>> %L)', (path || 'key'::text)::text);
            txt text := format('(r.attributes ->> %s)', format('($2 #>> %L)', (path || 'key'::text)::text));
            -- The value as the field stores it; NULL (matching nobody) if it no longer parses as
            -- the field's type (a field deleted and made again with another type mid-send).
            typed text := CASE field_kind
                              WHEN 'number' THEN 'CASE WHEN %1$s ~ ''^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$'' THEN to_jsonb(%1$s::numeric) END'
                              WHEN 'yes_no' THEN 'CASE WHEN %1$s IN (''true'', ''false'') THEN to_jsonb(%1$s::boolean) END'
                              ELSE 'to_jsonb(%1$s)' END;
        BEGIN
            CASE node->>'op'
            -- Equality by containment (a text field, a choice too long to be one): the GIN
            -- index on attributes answers it. Never NULL: `@>` of two non-NULL values is not.
            WHEN 'eq' THEN RETURN format('(%2$s) IS NOT NULL AND r.attributes @> jsonb_build_object(%1$s, %2$s)', k, format(typed, v));
            WHEN 'ne' THEN RETURN format('NOT ((%2$s) IS NOT NULL AND r.attributes @> jsonb_build_object(%1$s, %2$s))', k, format(typed, v));
            WHEN 'contains' THEN RETURN format('coalesce(strpos(lower(%s), lower(%s)) > 0, false)', txt, v);
            WHEN 'starts_with' THEN RETURN format('coalesce(starts_with(lower(%s), lower(%s)), false)', txt, v);
            WHEN 'is_set' THEN RETURN format('coalesce(%s, '''') <> ''''', txt);
            WHEN 'is_empty' THEN RETURN format('coalesce(%s, '''') = ''''', txt);
            ELSE
                -- A comparison the field's type does not take (its type changed since the tree
                -- was checked): nobody matches, rather than every chunk of a send failing.
                RETURN 'false';
            END CASE;
        END;
    WHEN 'signed_up' THEN
        CASE node->>'op'
        WHEN 'before' THEN RETURN format('r.created_at < %s::date', v);
        WHEN 'after' THEN RETURN format('r.created_at >= %s::date + 1', v);
        ELSE RETURN format('r.created_at > now() - %s', days);
        END CASE;
    WHEN 'source' THEN
        RETURN format('coalesce((SELECT c.source FROM consent_events c WHERE c.tenant_id = $1 AND c.reader_id = r.id'
                      ' ORDER BY c.id LIMIT 1) = ($2 #>> %L), false)', (path || 'source'::text)::text);
    WHEN 'email_domain' THEN
        -- The indexed expression, compared with the domain as stored (lowercase, no @).
        RETURN format('lower(split_part(r.email, ''@'', 2)) %s ($2 #>> %L)',
                      CASE WHEN (node->>'is')::boolean IS DISTINCT FROM false THEN '=' ELSE '<>' END,
                      (path || 'domain'::text)::text);
    WHEN 'opened', 'clicked' THEN
        IF node ? 'days' AND jsonb_typeof(node->'days') = 'number' THEN
            recent := ' > now() - ' || days;
        ELSE
            recent := ' IS NOT NULL';
        END IF;
        IF jsonb_typeof(node->'campaign_id') = 'string' THEN
            -- A given campaign: among the readers it was sent to ("did not open it" never
            -- matches someone who never got it). The send log keeps each reader's first open.
            RETURN format('r.id IN (SELECT s.reader_id FROM sends s WHERE s.tenant_id = $1 AND s.campaign_id = ($2 #>> %L)::uuid'
                          ' AND s.status = ''sent'' AND %s coalesce(s.%s%s, false)'
                          ' AND ($3::bigint IS NULL OR s.reader_id > $3) AND ($4::bigint IS NULL OR s.reader_id <= $4))',
                          (path || 'campaign_id'::text)::text,
                          CASE WHEN (node->>'did')::boolean IS DISTINCT FROM false THEN '' ELSE 'NOT' END,
                          CASE kind WHEN 'opened' THEN 'opened_at' ELSE 'clicked_at' END, recent);
        END IF;
        -- Did not open / click (did = true has an id set).
        RETURN format('NOT EXISTS (SELECT 1 FROM reader_engagement e WHERE e.tenant_id = $1 AND e.reader_id = r.id AND e.%s%s)',
                      CASE kind WHEN 'opened' THEN 'last_open_at' ELSE 'last_click_at' END, recent);
    WHEN 'never_opened' THEN
        RETURN 'NOT EXISTS (SELECT 1 FROM reader_engagement e WHERE e.tenant_id = $1 AND e.reader_id = r.id AND e.last_open_at IS NOT NULL)';
    WHEN 'unengaged' THEN
        -- Campaigns received since the last open, read from the send log (kept for good), at
        -- most N of them per reader; only campaigns that could see an open (tracking on): a
        -- reader of untracked campaigns has not stopped opening.
        RETURN format('(SELECT count(*) FROM (SELECT 1 FROM sends s JOIN campaigns c ON c.id = s.campaign_id AND c.tracking = ''on'''
                      ' WHERE s.reader_id = r.id AND s.tenant_id = $1 AND s.status = ''sent'''
                      ' AND s.sent_at > coalesce((SELECT e.last_open_at FROM reader_engagement e WHERE e.tenant_id = $1 AND e.reader_id = r.id), ''-infinity'')'
                      ' LIMIT ($2 #>> %1$L)::int) x) >= ($2 #>> %1$L)::int', (path || 'campaigns'::text)::text);
    ELSE
        RAISE EXCEPTION 'segment: unknown condition %', kind;
    END CASE;
END $$;

-- The count's query for a tree. An "all" group at the top with conditions that have id sets
-- joins those sets (each names a reader once, so the join counts each match once) and joins
-- `readers` only for the conditions that need the reader's row; any other tree counts the
-- workspace's readers filtered by `segment_where`.
CREATE FUNCTION segment_count_sql(p_definition jsonb) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = public, pg_temp AS $$
DECLARE
    children text := CASE WHEN p_definition ? 'rules' THEN 'rules' ELSE 'conditions' END;
    rule jsonb;
    place text[];
    ids text;
    sets text[] := '{}';
    rest text[] := '{}';
    counted text;
BEGIN
    IF p_definition->>'match' = 'all' THEN
        FOR rule, place IN
            SELECT c, ARRAY[children, (i - 1)::text] FROM jsonb_array_elements(p_definition->children) WITH ORDINALITY AS x(c, i)
        LOOP
            ids := segment_ids(rule, place);
            IF ids IS NULL THEN
                rest := rest || ('(' || segment_where(rule, place) || ')');
            ELSE
                sets := sets || ids;
            END IF;
        END LOOP;
    END IF;
    IF cardinality(sets) = 0 THEN
        RETURN 'SELECT count(*) FROM readers r WHERE r.tenant_id = $1 AND (' || segment_where(p_definition, '{}') || ')';
    END IF;
    counted := 'SELECT count(*) FROM (' || sets[1] || ') i1';
    FOR i IN 2 .. cardinality(sets) LOOP
        counted := counted || format(' JOIN (%s) i%s ON i%2$s.reader_id = i1.reader_id', sets[i], i);
    END LOOP;
    IF cardinality(rest) > 0 THEN
        counted := counted || ' JOIN readers r ON r.tenant_id = $1 AND r.id = i1.reader_id WHERE ' || array_to_string(rest, ' AND ');
    END IF;
    RETURN counted;
END $$;
REVOKE ALL ON FUNCTION segment_count_sql(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_count_sql(jsonb) TO herald_system;

-- Merge joins only. No nested loops: the sets are joined on reader ids that a range's index does
-- not hand back in order, so a nested loop rescans its inner side once per outer row; with
-- statistics that did not yet know a big import (2M new values, not yet analysed) the planner
-- estimated one row for each side of a choice ∧ range and ran that loop for over ten minutes.
-- No hash joins: most sets come from an index in reader-id order (a list's subscriptions, a
-- tag, a field's equal values), and merging them beat hashing on two cores at 1M readers
-- (list ∧ choice 218 → 96 ms, list ∧ tag 141 → 57 ms, list ∧ opened 176 → 78 ms; the slowest
-- pair 218 → 110 ms); a range's set is sorted first.
CREATE OR REPLACE FUNCTION segment_count(p_definition jsonb) RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp SET work_mem = '64MB'
SET enable_nestloop = off SET enable_hashjoin = off AS $$
DECLARE
    tenant uuid := app_tenant_id();
    n bigint;
BEGIN
    IF tenant IS NULL THEN
        RETURN 0;
    END IF;
    EXECUTE segment_count_sql(p_definition) INTO n USING tenant, p_definition, NULL::bigint, NULL::bigint;
    RETURN n;
END $$;

CREATE OR REPLACE FUNCTION segment_plan(p_definition jsonb) RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp SET work_mem = '64MB'
SET enable_nestloop = off SET enable_hashjoin = off AS $$
DECLARE
    tenant uuid := app_tenant_id();
BEGIN
    IF tenant IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE 'EXPLAIN ' || segment_count_sql(p_definition) USING tenant, p_definition, NULL::bigint, NULL::bigint;
END $$;
