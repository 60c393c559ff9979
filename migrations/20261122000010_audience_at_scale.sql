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
CREATE FUNCTION search_readers(
    p_search text,      -- LIKE pattern over lower(email) || ' ' || lower(name), already escaped
    p_status text,
    p_list uuid,
    p_attributes jsonb[], -- OR of `attributes @> x`
    p_before bigint,
    p_limit int
) RETURNS SETOF readers
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    tenant uuid := app_tenant_id();
    q text := 'SELECT r.* FROM readers r WHERE r.tenant_id = $1';
BEGIN
    IF tenant IS NULL THEN
        RETURN;
    END IF;
    IF p_search IS NOT NULL THEN
        q := q || ' AND (lower(r.email) || '' '' || lower(r.name)) LIKE $2';
    END IF;
    IF p_status IS NOT NULL THEN
        q := q || ' AND r.status = $3';
    END IF;
    IF p_list IS NOT NULL THEN
        q := q || ' AND EXISTS (SELECT 1 FROM subscriptions s WHERE s.tenant_id = $1 AND s.list_id = $4'
               || ' AND s.reader_id = r.id AND s.status <> ''unsubscribed'')';
    END IF;
    IF cardinality(p_attributes) > 0 THEN
        q := q || ' AND (' || (
            SELECT string_agg(format('r.attributes @> $5[%s]', i), ' OR ')
            FROM generate_series(1, cardinality(p_attributes)) i
        ) || ')';
    END IF;
    IF p_before IS NOT NULL THEN
        q := q || ' AND r.id < $6';
    END IF;
    q := q || ' ORDER BY r.id DESC LIMIT $7';
    RETURN QUERY EXECUTE q USING tenant, p_search, p_status, p_list, p_attributes, p_before, p_limit;
END $$;
REVOKE ALL ON FUNCTION search_readers(text, text, uuid, jsonb[], bigint, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION search_readers(text, text, uuid, jsonb[], bigint, int) TO herald_app;
