-- Reader search for common terms. A term matching many readers ("reader1", "gmail") made the
-- trigram index path fetch and sort every match (~380 ms at 1M readers), while the newest page
-- was sitting in the first few thousand rows by id. A page is now looked for first in a bounded
-- window of the newest rows (by the id index, newest first): if the window holds a whole page,
-- those are exactly the newest matches, since every newer row was examined. Otherwise (a rare
-- term, or a filter that matches little) the indexed query of migration 0010 runs as before.
-- Unpaged calls (p_limit NULL: bulk actions and export over a whole filter) skip the window.
CREATE OR REPLACE FUNCTION search_readers(
    p_search text,
    p_status text,
    p_list uuid,
    p_attributes jsonb[],
    p_before bigint,
    p_limit int
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

    IF p_limit IS NOT NULL AND cond <> '' THEN
        -- The window: the newest `window_rows` readers before the cursor, filtered.
        RETURN QUERY EXECUTE
            'SELECT r.* FROM (SELECT * FROM readers w WHERE w.tenant_id = $1'
            || CASE WHEN p_before IS NOT NULL THEN ' AND w.id < $6' ELSE '' END
            || ' ORDER BY w.id DESC LIMIT ' || window_rows || ') r WHERE true' || cond
            || ' ORDER BY r.id DESC LIMIT $7'
            USING tenant, p_search, p_status, p_list, p_attributes, p_before, p_limit;
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
                          AND (p_before IS NULL OR w.id < p_before) ORDER BY w.id DESC LIMIT window_rows) x);
            RETURN;
        END IF;
    END IF;

    RETURN QUERY EXECUTE
        'SELECT r.* FROM readers r WHERE r.tenant_id = $1' || cond
        || CASE WHEN p_before IS NOT NULL THEN ' AND r.id < $6' ELSE '' END
        || ' ORDER BY r.id DESC' || CASE WHEN p_limit IS NOT NULL THEN ' LIMIT $7' ELSE '' END
        USING tenant, p_search, p_status, p_list, p_attributes, p_before, p_limit;
END $$;

-- Erasing readers at scale. Deleting a reader sets `consent_events.reader_id` to NULL (the
-- ledger outlives the reader), which needs an index leading with reader_id: the one from 0008
-- led with tenant_id, so each deleted reader scanned the whole ledger, and deleting a workspace
-- of 1M readers never finished. Reader ids are unique across workspaces, so (reader_id, id)
-- serves the reader page's history as well, at no extra cost per imported row.
DROP INDEX consent_events_reader_idx;
CREATE INDEX consent_events_reader_idx ON consent_events (reader_id, id DESC);
