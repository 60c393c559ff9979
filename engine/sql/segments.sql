-- The segment compiler: a definition (JSON) to a WHERE clause, counts, plans and member
-- ids (engine/src/audience/segments.rs, types/src/segment.rs).
--
-- The one current text of these functions and triggers: `herald migrate` applies this file
-- after the schema migrations when it has changed. Edit here, never in a migration (a
-- changed signature needs its DROP FUNCTION in a migration first). See docs/database.md.

-- Merge joins only. No nested loops: the sets are joined on reader ids that a range's index does
-- not hand back in order, so a nested loop rescans its inner side once per outer row; with
-- statistics that did not yet know a big import (2M new values, not yet analysed) the planner
-- estimated one row for each side of a choice ∧ range and ran that loop for over ten minutes.
-- No hash joins: most sets come from an index in reader-id order (a list's subscriptions, a
-- tag, a field's equal values), and merging them beat hashing on two cores at 1M readers
-- (list ∧ choice 218 → 96 ms, list ∧ tag 141 → 57 ms, list ∧ opened 176 → 78 ms; the slowest
-- pair 218 → 110 ms); a range's set is sorted first.
CREATE OR REPLACE FUNCTION segment_count(p_definition jsonb)
 RETURNS bigint
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET work_mem TO '64MB'
 SET enable_nestloop TO 'off'
 SET enable_hashjoin TO 'off'
AS $function$
DECLARE
    tenant uuid := app_tenant_id();
    n bigint;
BEGIN
    IF tenant IS NULL THEN
        RETURN 0;
    END IF;
    EXECUTE segment_count_sql(p_definition) INTO n USING tenant, p_definition, NULL::bigint, NULL::bigint;
    RETURN n;
END $function$;
REVOKE ALL ON FUNCTION segment_count(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_count(jsonb) TO herald_app;

-- The count's query for a tree. An "all" group at the top with conditions that have id sets
-- joins those sets (each names a reader once, so the join counts each match once) and joins
-- `readers` only for the conditions that need the reader's row; any other tree counts the
-- workspace's readers filtered by `segment_where`.
CREATE OR REPLACE FUNCTION segment_count_sql(p_definition jsonb)
 RETURNS text
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'public', 'pg_temp'
AS $function$
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
END $function$;
REVOKE ALL ON FUNCTION segment_count_sql(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_count_sql(jsonb) TO herald_system;

-- 2. A condition's reader-id set: the text of a query of one column, `reader_id`, naming each
--    matching reader of the workspace once, from a table whose rows exist only for the
--    workspace's readers; NULL when the condition needs the reader's row (a negation, a text
--    comparison, sign-up date, domain, a given campaign's sends, which repeat per edition). As
--    in `segment_where`, every value is read from the bound tree ($2) by a path
--    of fixed keys, $1 is the workspace, ($3, $4] an optional chunk of reader ids.
CREATE OR REPLACE FUNCTION segment_ids(node jsonb, path text[])
 RETURNS text
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'public', 'pg_temp'
AS $function$
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
END $function$;
REVOKE ALL ON FUNCTION segment_ids(jsonb,text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_ids(jsonb,text[]) TO herald_system;

-- The plan `segment_count` runs for a tree (EXPLAIN, no ANALYZE): how a slow count is
-- diagnosed, and how a test checks that a condition uses its index. The workspace's own
-- query only, as above.
-- VOLATILE only because Postgres refuses EXPLAIN in a function declared otherwise.
CREATE OR REPLACE FUNCTION segment_plan(p_definition jsonb)
 RETURNS SETOF text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET work_mem TO '64MB'
 SET enable_nestloop TO 'off'
 SET enable_hashjoin TO 'off'
AS $function$
DECLARE
    tenant uuid := app_tenant_id();
BEGIN
    IF tenant IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE 'EXPLAIN ' || segment_count_sql(p_definition) USING tenant, p_definition, NULL::bigint, NULL::bigint;
END $function$;
REVOKE ALL ON FUNCTION segment_plan(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_plan(jsonb) TO herald_app;

-- The workspace's readers matching a tree: every one (p_limit NULL), newest first; those with
-- ids in (p_after, p_upto] (a fan-out chunk); or the newest p_limit (a preview). Runs as the
-- system role, outside row security (under it the planner may not use an index for `@>`, LIKE
-- or an expression: see search_readers), and so applies the workspace rule itself, reading the
-- workspace only from the transaction's app.tenant_id, never from an argument.
CREATE OR REPLACE FUNCTION segment_readers(p_definition jsonb, p_after bigint, p_upto bigint, p_limit integer)
 RETURNS SETOF bigint
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET work_mem TO '64MB'
AS $function$
DECLARE
    tenant uuid := app_tenant_id();
BEGIN
    IF tenant IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'SELECT r.id FROM readers r WHERE r.tenant_id = $1'
        || CASE WHEN p_after IS NOT NULL THEN ' AND r.id > $3' ELSE '' END
        || CASE WHEN p_upto IS NOT NULL THEN ' AND r.id <= $4' ELSE '' END
        || ' AND (' || segment_where(p_definition, '{}') || ')'
        || CASE WHEN p_limit IS NOT NULL THEN ' ORDER BY r.id DESC LIMIT $5' ELSE '' END
        USING tenant, p_definition, p_after, p_upto, p_limit;
END $function$;
REVOKE ALL ON FUNCTION segment_readers(jsonb,bigint,bigint,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_readers(jsonb,bigint,bigint,integer) TO herald_app;

-- Which of `p_readers` the tree matches now: delivery asks again, for the readers of a claim,
-- with the tree that let them in (a reader who left the target list that brought them is no
-- longer held, even while confirmed on another list). Like segment_readers it runs outside row
-- security and reads the workspace from the transaction alone. ($3, $4] bounds the readers'
-- ids, so the compiler's id-set fragments read only that range.
CREATE OR REPLACE FUNCTION segment_holds(p_definition jsonb, p_readers bigint[])
 RETURNS SETOF bigint
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET work_mem TO '64MB'
AS $function$
DECLARE
    tenant uuid := app_tenant_id();
BEGIN
    IF tenant IS NULL OR cardinality(p_readers) IS NULL OR cardinality(p_readers) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'SELECT r.id FROM readers r WHERE r.tenant_id = $1 AND r.id = ANY($5)'
        || ' AND (' || segment_where(p_definition, '{}') || ')'
        USING tenant, p_definition, (SELECT min(x) - 1 FROM unnest(p_readers) x), (SELECT max(x) FROM unnest(p_readers) x),
              p_readers;
END $function$;
REVOKE ALL ON FUNCTION segment_holds(jsonb,bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_holds(jsonb,bigint[]) TO herald_app;

-- The compiler, with every condition that has an id set reading it.
CREATE OR REPLACE FUNCTION segment_where(node jsonb, path text[])
 RETURNS text
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'public', 'pg_temp'
AS $function$
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
END $function$;
REVOKE ALL ON FUNCTION segment_where(jsonb,text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_where(jsonb,text[]) TO herald_system;
