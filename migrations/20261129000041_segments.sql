-- Issue 32: saved segments, the per-reader engagement summary they read, and campaigns that
-- target segments (and exclude one).

-- 1. Segments: a name and a condition tree (`herald_types::segment::Definition` as JSON).
CREATE TABLE segments (
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id         uuid NOT NULL,
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 80),
    definition jsonb NOT NULL CHECK (jsonb_typeof(definition) = 'object'),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE UNIQUE INDEX segments_tenant_name_key ON segments (tenant_id, lower(name));

-- 2. The engagement summary: one row per reader that ever opened, clicked or bounced softly,
--    kept current by a trigger on `events` (so every writer of events — the tracking flush,
--    provider webhooks — keeps it), so segment conditions on engagement read one indexed row
--    per reader instead of the event log, and stay right when old events are dropped.
--    Machine opens (prefetches) never count as opens; a click counts as one (images blocked).
CREATE TABLE reader_engagement (
    tenant_id           uuid NOT NULL,
    reader_id           bigint NOT NULL,
    last_open_at        timestamptz,
    last_click_at       timestamptz,
    opens               bigint NOT NULL DEFAULT 0,
    clicks              bigint NOT NULL DEFAULT 0,
    last_soft_bounce_at timestamptz,
    PRIMARY KEY (tenant_id, reader_id),
    FOREIGN KEY (tenant_id, reader_id) REFERENCES readers (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX reader_engagement_open_idx ON reader_engagement (tenant_id, last_open_at) WHERE last_open_at IS NOT NULL;
CREATE INDEX reader_engagement_click_idx ON reader_engagement (tenant_id, last_click_at) WHERE last_click_at IS NOT NULL;
CREATE INDEX reader_engagement_bounce_idx ON reader_engagement (tenant_id, last_soft_bounce_at)
    WHERE last_soft_bounce_at IS NOT NULL;

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['segments', 'reader_engagement'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY %I ON %I FOR ALL USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id())', t || '_tenant', t);
        -- Now, not after this run: the backfill and the trigger below write as the system role.
        EXECUTE format('CREATE POLICY %I ON %I FOR ALL TO herald_system USING (true) WITH CHECK (true)', t || '_system', t);
    END LOOP;
END $$;

-- Runs as the system role (`migrate::grant_system_role` makes it the owner): the tracking flush
-- inserts events of many workspaces in one statement.
CREATE FUNCTION reader_engagement_apply() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    INSERT INTO reader_engagement AS e (tenant_id, reader_id, last_open_at, last_click_at, opens, clicks, last_soft_bounce_at)
    SELECT n.tenant_id, n.reader_id,
           max(n.at) FILTER (WHERE n.kind IN ('open', 'click') AND NOT n.prefetch),
           max(n.at) FILTER (WHERE n.kind = 'click'),
           count(*) FILTER (WHERE n.kind = 'open' AND NOT n.prefetch),
           count(*) FILTER (WHERE n.kind = 'click'),
           max(n.at) FILTER (WHERE n.kind = 'bounce_soft')
    FROM new_rows n
    WHERE n.reader_id IS NOT NULL AND n.kind IN ('open', 'click', 'bounce_soft')
      AND EXISTS (SELECT 1 FROM readers r WHERE r.tenant_id = n.tenant_id AND r.id = n.reader_id)
    GROUP BY 1, 2
    -- One order for every writer: two flushes touching the same readers never deadlock.
    ORDER BY 1, 2
    ON CONFLICT (tenant_id, reader_id) DO UPDATE SET
        last_open_at = greatest(e.last_open_at, excluded.last_open_at),
        last_click_at = greatest(e.last_click_at, excluded.last_click_at),
        opens = e.opens + excluded.opens,
        clicks = e.clicks + excluded.clicks,
        last_soft_bounce_at = greatest(e.last_soft_bounce_at, excluded.last_soft_bounce_at);
    RETURN NULL;
END $$;
CREATE TRIGGER events_engagement AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION reader_engagement_apply();

-- The summary of the events kept so far (run while the owner holds the system role's view).
INSERT INTO reader_engagement (tenant_id, reader_id, last_open_at, last_click_at, opens, clicks, last_soft_bounce_at)
SELECT ev.tenant_id, ev.reader_id,
       max(ev.at) FILTER (WHERE ev.kind IN ('open', 'click') AND NOT ev.prefetch),
       max(ev.at) FILTER (WHERE ev.kind = 'click'),
       count(*) FILTER (WHERE ev.kind = 'open' AND NOT ev.prefetch),
       count(*) FILTER (WHERE ev.kind = 'click'),
       max(ev.at) FILTER (WHERE ev.kind = 'bounce_soft')
FROM events ev JOIN readers r ON r.tenant_id = ev.tenant_id AND r.id = ev.reader_id
WHERE ev.kind IN ('open', 'click', 'bounce_soft')
GROUP BY 1, 2;

-- 3. Indexes for the conditions a segment count must answer fast at 1M readers: sign-up date
--    and email domain (the expression `segment_where` writes, exactly).
-- The summary is written only by the trigger above.
REVOKE INSERT, UPDATE, DELETE ON reader_engagement FROM herald_app;

CREATE INDEX readers_tenant_created_idx ON readers (tenant_id, created_at);
CREATE INDEX readers_tenant_domain_idx ON readers (tenant_id, lower(split_part(email, '@', 2)));

-- 4. Campaigns target segments too, and may exclude one. `audience` is the tree the fan-out
--    evaluates, fixed when it starts (target lists and the segments' definitions at that moment),
--    so editing a segment mid-send cannot change who a running send reaches.
ALTER TABLE campaigns
    ADD COLUMN segment_ids uuid[] NOT NULL DEFAULT '{}',
    ADD COLUMN exclude_segment_id uuid,
    ADD COLUMN audience jsonb;

-- 5. The compiler. A tree becomes a boolean SQL expression over `r` (a row of `readers`), made
--    only of the fixed fragments below: the tree itself is the bound parameter $2 and every
--    value is read from it by a path made of fixed keys and array positions (`$2 #>> '{rules,0,value}'`),
--    so nothing in the tree ever becomes SQL text; $1 is the workspace, $3 and $4 an optional
--    range of reader ids (a fan-out chunk: every subquery reads only that range). A group is
--    `{"match": "all"|"any", "rules"|"conditions": [...]}`, `{"not": node}` negates (a campaign's
--    exclusion), anything else is a condition (`herald_types::segment::Condition`). Each
--    fragment is true or false, never NULL, so `not` and `any` mean what they say.
CREATE FUNCTION segment_where(node jsonb, path text[]) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = public, pg_temp AS $$
DECLARE
    children text;
    joined text;
    kind text := node->>'kind';
    field_kind text;
    v text;
    v2 text;
    days text;
    recent text;
    -- Limits a subquery's reader column to the chunk ($3, $4], when there is one.
    chunk text := ' AND ($3::bigint IS NULL OR %1$s > $3) AND ($4::bigint IS NULL OR %1$s <= $4)';
BEGIN
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
    -- The operands, as expressions reading the bound tree.
    v := format('($2 #>> %L)', (path || 'value'::text)::text);
    v2 := format('($2 #>> %L)', (path || 'value2'::text)::text);
    days := format('make_interval(days => ($2 #>> %L)::int)', (path || 'days'::text)::text);
    CASE kind
    WHEN 'list' THEN
        IF node->>'state' = 'not_member' THEN
            RETURN format('NOT EXISTS (SELECT 1 FROM subscriptions s WHERE s.tenant_id = $1 AND s.list_id = ($2 #>> %L)::uuid'
                          ' AND s.reader_id = r.id)', (path || 'list_id'::text)::text);
        END IF;
        RETURN format('r.id IN (SELECT s.reader_id FROM subscriptions s WHERE s.tenant_id = $1 AND s.list_id = ($2 #>> %L)::uuid%s%s)',
                      (path || 'list_id'::text)::text, format(chunk, 's.reader_id'),
                      CASE node->>'state' WHEN 'subscribed' THEN ' AND s.status = ''confirmed'''
                                          WHEN 'pending' THEN ' AND s.status = ''unconfirmed'''
                                          WHEN 'unsubscribed' THEN ' AND s.status = ''unsubscribed'''
                                          WHEN 'member' THEN '' ELSE ' AND false' END);
    WHEN 'tag' THEN
        IF (node->>'has')::boolean IS DISTINCT FROM false THEN
            RETURN format('r.id IN (SELECT t.reader_id FROM reader_tags t WHERE t.tenant_id = $1 AND t.tag_id = ($2 #>> %L)::uuid%s)',
                          (path || 'tag_id'::text)::text, format(chunk, 't.reader_id'));
        END IF;
        RETURN format('NOT EXISTS (SELECT 1 FROM reader_tags t WHERE t.tenant_id = $1 AND t.tag_id = ($2 #>> %L)::uuid AND t.reader_id = r.id)',
                      (path || 'tag_id'::text)::text);
    WHEN 'field' THEN
        SELECT f.kind INTO field_kind FROM fields f WHERE f.tenant_id = app_tenant_id() AND f.key = node->>'key';
        IF field_kind IS NULL THEN
            RETURN 'false';  -- the field was deleted: nobody has it
        END IF;
        -- The key, bound like a value; `val` the reader's value as JSON, `txt` as text.
        DECLARE
            k text := format('($2 #>> %L)', (path || 'key'::text)::text);
            val text := format('(r.attributes -> %s)', format('($2 #>> %L)', (path || 'key'::text)::text));
            txt text := format('(r.attributes ->> %s)', format('($2 #>> %L)', (path || 'key'::text)::text));
            -- The value as the field stores it; NULL (matching nobody) if it no longer parses as
            -- the field's type (a field deleted and made again with another type mid-send).
            typed text := CASE field_kind
                              WHEN 'number' THEN 'CASE WHEN %1$s ~ ''^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$'' THEN to_jsonb(%1$s::numeric) END'
                              WHEN 'yes_no' THEN 'CASE WHEN %1$s IN (''true'', ''false'') THEN to_jsonb(%1$s::boolean) END'
                              ELSE 'to_jsonb(%1$s)' END;
            numeric_value text := 'CASE WHEN %1$s ~ ''^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$'' THEN %1$s::numeric END';
            num text;
            day text;
        BEGIN
            num := format('(CASE WHEN jsonb_typeof(%s) = ''number'' THEN (%s)::numeric END)', val, val);
            day := format('(CASE WHEN %s ~ ''^\d{4}-\d{2}-\d{2}$'' THEN %s COLLATE "C" END)', txt, txt);
            CASE node->>'op'
            -- Equality by containment: the GIN index on attributes answers it.
            -- Never NULL: `@>` of two non-NULL values is not (and a coalesce around it would
            -- hide it from the index).
            WHEN 'eq' THEN RETURN format('(%2$s) IS NOT NULL AND r.attributes @> jsonb_build_object(%1$s, %2$s)', k, format(typed, v));
            WHEN 'ne' THEN RETURN format('NOT ((%2$s) IS NOT NULL AND r.attributes @> jsonb_build_object(%1$s, %2$s))', k, format(typed, v));
            WHEN 'contains' THEN RETURN format('coalesce(strpos(lower(%s), lower(%s)) > 0, false)', txt, v);
            WHEN 'starts_with' THEN RETURN format('coalesce(starts_with(lower(%s), lower(%s)), false)', txt, v);
            WHEN 'is_set' THEN RETURN format('coalesce(%s, '''') <> ''''', txt);
            WHEN 'is_empty' THEN RETURN format('coalesce(%s, '''') = ''''', txt);
            ELSE
                IF field_kind = 'number' THEN
                    CASE node->>'op'
                    WHEN 'lt' THEN RETURN format('coalesce(%s < (%s), false)', num, format(numeric_value, v));
                    WHEN 'gt' THEN RETURN format('coalesce(%s > (%s), false)', num, format(numeric_value, v));
                    WHEN 'between' THEN RETURN format('coalesce(%s BETWEEN (%s) AND (%s), false)', num, format(numeric_value, v), format(numeric_value, v2));
                    ELSE NULL;
                    END CASE;
                ELSIF field_kind = 'date' THEN
                    CASE node->>'op'
                    WHEN 'before' THEN RETURN format('coalesce(%s < %s, false)', day, v);
                    WHEN 'after' THEN RETURN format('coalesce(%s > %s, false)', day, v);
                    WHEN 'between' THEN RETURN format('coalesce(%s BETWEEN %s AND %s, false)', day, v, v2);
                    WHEN 'within_last_days' THEN
                        RETURN format('coalesce(%s BETWEEN to_char(current_date - %s, ''YYYY-MM-DD'') AND to_char(current_date, ''YYYY-MM-DD''), false)',
                                      day, days);
                    WHEN 'anniversary_within_days' THEN
                        -- Month and day within the next N days (29 February only in leap years).
                        RETURN format('coalesce(substr(%s, 6, 5) IN (SELECT to_char(current_date + g, ''MM-DD'')'
                                      ' FROM generate_series(0, least(($2 #>> %L)::int, 366)) g), false)',
                                      day, (path || 'days'::text)::text);
                    ELSE NULL;
                    END CASE;
                END IF;
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
                          ' AND s.status = ''sent'' AND %s coalesce(s.%s%s, false)%s)',
                          (path || 'campaign_id'::text)::text,
                          CASE WHEN (node->>'did')::boolean IS DISTINCT FROM false THEN '' ELSE 'NOT' END,
                          CASE kind WHEN 'opened' THEN 'opened_at' ELSE 'clicked_at' END, recent,
                          format(chunk, 's.reader_id'));
        END IF;
        IF (node->>'did')::boolean IS DISTINCT FROM false THEN
            RETURN format('r.id IN (SELECT e.reader_id FROM reader_engagement e WHERE e.tenant_id = $1 AND e.%s%s%s)',
                          CASE kind WHEN 'opened' THEN 'last_open_at' ELSE 'last_click_at' END, recent, format(chunk, 'e.reader_id'));
        END IF;
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
    WHEN 'soft_bounced' THEN
        RETURN format('r.id IN (SELECT e.reader_id FROM reader_engagement e WHERE e.tenant_id = $1 AND e.last_soft_bounce_at > now() - %s%s)',
                      days, format(chunk, 'e.reader_id'));
    ELSE
        RAISE EXCEPTION 'segment: unknown condition %', kind;
    END CASE;
END $$;
REVOKE ALL ON FUNCTION segment_where(jsonb, text[]) FROM PUBLIC;
-- Called only by the functions below, which run as the system role.
GRANT EXECUTE ON FUNCTION segment_where(jsonb, text[]) TO herald_system;

-- The workspace's readers matching a tree: every one (p_limit NULL), newest first; those with
-- ids in (p_after, p_upto] (a fan-out chunk); or the newest p_limit (a preview). Runs as the
-- system role, outside row security (under it the planner may not use an index for `@>`, LIKE
-- or an expression: see search_readers), and so applies the workspace rule itself, reading the
-- workspace only from the transaction's app.tenant_id, never from an argument.
CREATE FUNCTION segment_readers(p_definition jsonb, p_after bigint, p_upto bigint, p_limit int) RETURNS SETOF bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp SET work_mem = '64MB' AS $$
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
END $$;
REVOKE ALL ON FUNCTION segment_readers(jsonb, bigint, bigint, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_readers(jsonb, bigint, bigint, int) TO herald_app;

-- How many of the workspace's readers match a tree.
CREATE FUNCTION segment_count(p_definition jsonb) RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp SET work_mem = '64MB' AS $$
DECLARE
    tenant uuid := app_tenant_id();
    n bigint;
BEGIN
    IF tenant IS NULL THEN
        RETURN 0;
    END IF;
    EXECUTE 'SELECT count(*) FROM readers r WHERE r.tenant_id = $1 AND (' || segment_where(p_definition, '{}') || ')'
        INTO n USING tenant, p_definition, NULL::bigint, NULL::bigint;
    RETURN n;
END $$;
REVOKE ALL ON FUNCTION segment_count(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_count(jsonb) TO herald_app;

-- The plan `segment_count` runs for a tree (EXPLAIN, no ANALYZE): how a slow count is
-- diagnosed, and how a test checks that a condition uses its index. The workspace's own
-- query only, as above.
-- VOLATILE only because Postgres refuses EXPLAIN in a function declared otherwise.
CREATE FUNCTION segment_plan(p_definition jsonb) RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp SET work_mem = '64MB' AS $$
DECLARE
    tenant uuid := app_tenant_id();
BEGIN
    IF tenant IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE 'EXPLAIN SELECT count(*) FROM readers r WHERE r.tenant_id = $1 AND ('
        || segment_where(p_definition, '{}') || ')' USING tenant, p_definition, NULL::bigint, NULL::bigint;
END $$;
REVOKE ALL ON FUNCTION segment_plan(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_plan(jsonb) TO herald_app;
