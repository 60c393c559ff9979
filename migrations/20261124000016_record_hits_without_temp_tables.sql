-- `record_hits` (SECURITY DEFINER) kept its scratch rows in temporary tables it created on
-- first use. A caller could create a `pg_temp.hits_batch` of its own first (a view, or a table
-- with triggers) and have the owner's function run against it. The scratch rows are now plain
-- PL/pgSQL arrays of the two row types below, so the function touches no object the caller can
-- create; and `herald migrate` takes TEMPORARY away from the runtime role altogether
-- (`migrate::restrict_runtime_role`: database privileges are per database, not per migration).

CREATE TYPE hit_row AS (tenant_id uuid, campaign_id uuid, reader_id bigint, link_id bigint,
                        click boolean, prefetch boolean, at timestamptz);
CREATE TYPE hit_first AS (kind text, tenant_id uuid, campaign_id uuid, link_id bigint, domain text,
                          at timestamptz);

CREATE OR REPLACE FUNCTION record_hits(p_tenant uuid[], p_campaign uuid[], p_reader bigint[], p_link bigint[],
                            p_click boolean[], p_prefetch boolean[], p_at timestamptz[]) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    batch hit_row[];
    firsts hit_first[] := '{}';
    more hit_first[];
BEGIN
    SELECT array_agg(ROW(u.t, u.c, r.id, nullif(u.l, 0), u.k, u.p, u.a)::hit_row) INTO batch
    FROM unnest(p_tenant, p_campaign, p_reader, p_link, p_click, p_prefetch, p_at) AS u(t, c, r, l, k, p, a)
    JOIN campaigns c ON c.id = u.c AND c.tenant_id = u.t
    -- An erased reader's hits are kept as anonymous counts.
    LEFT JOIN readers r ON r.id = u.r AND r.tenant_id = u.t
    WHERE (NOT u.k OR EXISTS (SELECT 1 FROM campaign_links l WHERE l.id = u.l AND l.campaign_id = u.c));
    IF batch IS NULL THEN
        RETURN 0;
    END IF;

    -- Each reader's first click on each link, counted before this batch joins the log.
    SELECT coalesce(array_agg(ROW('link', x.tenant_id, x.campaign_id, x.link_id, NULL, NULL)::hit_first), '{}')
    INTO firsts FROM (
        SELECT DISTINCT h.tenant_id, h.campaign_id, h.reader_id, h.link_id FROM unnest(batch) h
        WHERE h.click AND h.reader_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM events e WHERE e.reader_id = h.reader_id AND e.campaign_id = h.campaign_id
                          AND e.kind = 'click' AND e.link_id = h.link_id)
    ) x;

    INSERT INTO events (tenant_id, campaign_id, reader_id, kind, link_id, prefetch, at)
    SELECT tenant_id, campaign_id, reader_id, CASE WHEN click THEN 'click' ELSE 'open' END, link_id, prefetch, at
    FROM unnest(batch);

    -- First opens (a click counts as an open: images were blocked; prefetches never count) and
    -- first clicks. `IS NULL` is re-checked on the latest row version, so two flushers racing
    -- on one reader count it once.
    WITH newly AS (
        UPDATE sends s SET opened_at = x.at
        FROM (SELECT campaign_id, reader_id, min(at) AS at FROM unnest(batch)
              WHERE reader_id IS NOT NULL AND NOT prefetch GROUP BY 1, 2) x
        WHERE s.reader_id = x.reader_id AND s.campaign_id = x.campaign_id AND s.opened_at IS NULL
        RETURNING s.tenant_id, s.campaign_id, split_part(s.email, '@', 2) AS domain, s.opened_at AS at
    )
    SELECT array_agg(ROW('open', f.tenant_id, f.campaign_id, NULL, f.domain, f.at)::hit_first) INTO more FROM newly f;
    firsts := firsts || coalesce(more, '{}');
    WITH newly AS (
        UPDATE sends s SET clicked_at = x.at
        FROM (SELECT campaign_id, reader_id, min(at) AS at FROM unnest(batch)
              WHERE reader_id IS NOT NULL AND click GROUP BY 1, 2) x
        WHERE s.reader_id = x.reader_id AND s.campaign_id = x.campaign_id AND s.clicked_at IS NULL
        RETURNING s.tenant_id, s.campaign_id, split_part(s.email, '@', 2) AS domain, s.clicked_at AS at
    )
    SELECT array_agg(ROW('click', f.tenant_id, f.campaign_id, NULL, f.domain, f.at)::hit_first) INTO more FROM newly f;
    firsts := firsts || coalesce(more, '{}');

    INSERT INTO campaign_stats AS s (campaign_id, tenant_id, opens, unique_opens, prefetch_opens, clicks, unique_clicks)
    SELECT campaign_id, tenant_id, sum(opens), sum(unique_opens), sum(prefetch_opens), sum(clicks), sum(unique_clicks)
    FROM (
        SELECT campaign_id, tenant_id, count(*) FILTER (WHERE NOT click AND NOT prefetch) AS opens, 0 AS unique_opens,
               count(*) FILTER (WHERE NOT click AND prefetch) AS prefetch_opens, count(*) FILTER (WHERE click) AS clicks,
               0 AS unique_clicks
        FROM unnest(batch) GROUP BY 1, 2
        UNION ALL
        SELECT campaign_id, tenant_id, 0, count(*) FILTER (WHERE kind = 'open'), 0, 0, count(*) FILTER (WHERE kind = 'click')
        FROM unnest(firsts) WHERE kind IN ('open', 'click') GROUP BY 1, 2
    ) x GROUP BY 1, 2 ORDER BY 1
    ON CONFLICT (campaign_id) DO UPDATE SET
        opens = s.opens + excluded.opens, unique_opens = s.unique_opens + excluded.unique_opens,
        prefetch_opens = s.prefetch_opens + excluded.prefetch_opens, clicks = s.clicks + excluded.clicks,
        unique_clicks = s.unique_clicks + excluded.unique_clicks, updated_at = now();

    INSERT INTO campaign_stats_hourly AS s (campaign_id, tenant_id, hour, opens, unique_opens, clicks, unique_clicks)
    SELECT campaign_id, tenant_id, hour, sum(opens), sum(unique_opens), sum(clicks), sum(unique_clicks)
    FROM (
        SELECT campaign_id, tenant_id, date_trunc('hour', at) AS hour, count(*) FILTER (WHERE NOT click AND NOT prefetch) AS opens,
               0 AS unique_opens, count(*) FILTER (WHERE click) AS clicks, 0 AS unique_clicks
        FROM unnest(batch) GROUP BY 1, 2, 3
        UNION ALL
        SELECT campaign_id, tenant_id, date_trunc('hour', at), 0, count(*) FILTER (WHERE kind = 'open'), 0,
               count(*) FILTER (WHERE kind = 'click')
        FROM unnest(firsts) WHERE kind IN ('open', 'click') GROUP BY 1, 2, 3
    ) x GROUP BY 1, 2, 3 ORDER BY 1, 3
    ON CONFLICT (campaign_id, hour) DO UPDATE SET
        opens = s.opens + excluded.opens, unique_opens = s.unique_opens + excluded.unique_opens,
        clicks = s.clicks + excluded.clicks, unique_clicks = s.unique_clicks + excluded.unique_clicks;

    INSERT INTO campaign_domain_stats AS s (campaign_id, tenant_id, domain, unique_opens, unique_clicks)
    SELECT campaign_id, tenant_id, domain, count(*) FILTER (WHERE kind = 'open'), count(*) FILTER (WHERE kind = 'click')
    FROM unnest(firsts) WHERE kind IN ('open', 'click') GROUP BY 1, 2, 3 ORDER BY 1, 3
    ON CONFLICT (campaign_id, domain) DO UPDATE SET
        unique_opens = s.unique_opens + excluded.unique_opens, unique_clicks = s.unique_clicks + excluded.unique_clicks;

    UPDATE campaign_links l SET clicks = l.clicks + x.clicks, unique_clicks = l.unique_clicks + x.uniq
    FROM (SELECT link_id, sum(clicks) AS clicks, sum(uniq) AS uniq FROM (
              SELECT link_id, count(*) AS clicks, 0 AS uniq FROM unnest(batch) WHERE click GROUP BY 1
              UNION ALL
              SELECT link_id, 0, count(*) FROM unnest(firsts) WHERE kind = 'link' GROUP BY 1
          ) y GROUP BY 1 ORDER BY 1) x
    WHERE l.id = x.link_id;

    RETURN cardinality(batch);
END $$;
REVOKE ALL ON FUNCTION record_hits(uuid[], uuid[], bigint[], bigint[], boolean[], boolean[], timestamptz[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION record_hits(uuid[], uuid[], bigint[], bigint[], boolean[], boolean[], timestamptz[]) TO herald_app;
