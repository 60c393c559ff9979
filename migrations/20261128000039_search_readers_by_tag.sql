-- Issue 32: the readers list, its bulk actions, the export and `GET /api/v1/readers` filter by
-- tag too. `search_readers` (migration 10: why it runs outside row security, and the window)
-- gains `p_tag`, a tag name matched case-insensitively; everything else is as it was.
DROP FUNCTION search_readers(text, text, uuid, jsonb[], bigint, int);
CREATE FUNCTION search_readers(
    p_search text,
    p_status text,
    p_list uuid,
    p_attributes jsonb[],
    p_before bigint,
    p_limit int,
    p_tag text DEFAULT NULL
) RETURNS SETOF readers
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
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
END $$;
REVOKE ALL ON FUNCTION search_readers(text, text, uuid, jsonb[], bigint, int, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION search_readers(text, text, uuid, jsonb[], bigint, int, text) TO herald_app;
