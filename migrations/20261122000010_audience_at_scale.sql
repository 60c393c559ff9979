-- The audience pages at a million readers per workspace.
--
-- 1. List counts are maintained, not counted: counting 500k subscriptions per page view took
--    ~300 ms. A statement-level trigger with transition tables folds each statement's changes
--    into one upsert per (list, status), so a 10,000-row import batch pays once, not per row.
CREATE TABLE list_counts (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    list_id   uuid NOT NULL REFERENCES lists (id) ON DELETE CASCADE,
    status    text NOT NULL,
    n         bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (list_id, status)
);
ALTER TABLE list_counts ENABLE ROW LEVEL SECURITY;
ALTER TABLE list_counts FORCE ROW LEVEL SECURITY;
CREATE POLICY list_counts_tenant ON list_counts FOR ALL
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());

INSERT INTO list_counts (tenant_id, list_id, status, n)
SELECT tenant_id, list_id, status, count(*) FROM subscriptions GROUP BY 1, 2, 3;

CREATE FUNCTION list_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Rows are upserted in key order so two concurrent statements touching the same lists
    -- lock the counters in the same order and cannot deadlock.
    IF TG_OP = 'INSERT' THEN
        INSERT INTO list_counts AS c (tenant_id, list_id, status, n)
        SELECT tenant_id, list_id, status, count(*) FROM new_rows GROUP BY 1, 2, 3 ORDER BY 2, 3
        ON CONFLICT (list_id, status) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        -- An UPDATE, not an upsert: when a list is deleted its counters are cascaded away
        -- before this runs, and must not be recreated for a list that no longer exists.
        UPDATE list_counts c SET n = c.n - d.n
        FROM (SELECT list_id, status, count(*) AS n FROM old_rows GROUP BY 1, 2) d
        WHERE c.list_id = d.list_id AND c.status = d.status;
    ELSE
        INSERT INTO list_counts AS c (tenant_id, list_id, status, n)
        SELECT tenant_id, list_id, status, sum(d) FROM (
            SELECT tenant_id, list_id, status, 1 AS d FROM new_rows
            UNION ALL
            SELECT tenant_id, list_id, status, -1 FROM old_rows
        ) changes GROUP BY 1, 2, 3 HAVING sum(d) <> 0 ORDER BY 2, 3
        ON CONFLICT (list_id, status) DO UPDATE SET n = c.n + excluded.n;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER subscriptions_count_insert AFTER INSERT ON subscriptions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION list_counts_apply();
CREATE TRIGGER subscriptions_count_update AFTER UPDATE ON subscriptions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION list_counts_apply();
CREATE TRIGGER subscriptions_count_delete AFTER DELETE ON subscriptions
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION list_counts_apply();

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
CREATE FUNCTION search_readers(
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
REVOKE ALL ON FUNCTION search_readers(text, text, uuid, jsonb[], bigint, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION search_readers(text, text, uuid, jsonb[], bigint, int) TO herald_app;
