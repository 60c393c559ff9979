-- Opens, clicks and the counters they feed: the tracking endpoints' batched writes
-- (engine/src/tracking/), engagement per reader, and the per-list and per-day audience counts
-- kept by triggers on subscriptions.
--
-- The one current text of these functions and triggers: `herald migrate` applies this file
-- after the schema migrations when it has changed. Edit here, never in a migration (a
-- changed signature needs its DROP FUNCTION in a migration first). See docs/database.md.

-- Growth rollup, folded per statement like list_counts: a subscription becoming confirmed is a
-- subscribe, becoming unsubscribed an unsubscribe.
CREATE OR REPLACE FUNCTION audience_daily_apply()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    INSERT INTO audience_daily AS a (tenant_id, day, subscribes, unsubscribes)
    SELECT n.tenant_id, (now() AT TIME ZONE 'UTC')::date,
           count(*) FILTER (WHERE n.status = 'confirmed'), count(*) FILTER (WHERE n.status = 'unsubscribed')
    FROM new_rows n
    WHERE n.status IN ('confirmed', 'unsubscribed')
      AND NOT EXISTS (SELECT 1 FROM old_rows o WHERE o.list_id = n.list_id AND o.reader_id = n.reader_id AND o.status = n.status)
    GROUP BY 1 ORDER BY 1
    ON CONFLICT (tenant_id, day) DO UPDATE
        SET subscribes = a.subscribes + excluded.subscribes, unsubscribes = a.unsubscribes + excluded.unsubscribes;
    RETURN NULL;
END $function$;

-- An INSERT trigger has no OLD TABLE to compare with, hence its own function.
CREATE OR REPLACE FUNCTION audience_daily_insert()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    INSERT INTO audience_daily AS a (tenant_id, day, subscribes, unsubscribes)
    SELECT n.tenant_id, (now() AT TIME ZONE 'UTC')::date,
           count(*) FILTER (WHERE n.status = 'confirmed'), count(*) FILTER (WHERE n.status = 'unsubscribed')
    FROM new_rows n WHERE n.status IN ('confirmed', 'unsubscribed')
    GROUP BY 1 ORDER BY 1
    ON CONFLICT (tenant_id, day) DO UPDATE
        SET subscribes = a.subscribes + excluded.subscribes, unsubscribes = a.unsubscribes + excluded.unsubscribes;
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION list_counts_apply()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
END $function$;

-- Runs as the system role (`migrate::grant_system_role` makes it the owner): the tracking flush
-- inserts events of many workspaces in one statement.
CREATE OR REPLACE FUNCTION reader_engagement_apply()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
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
END $function$;

-- Opens and clicks from every workspace arrive in one batch, so this runs as the owner; each
-- hit was authenticated by its HMAC token (per-workspace key) and is kept only if the campaign
-- belongs to the workspace the token names and a clicked link belongs to the campaign.
-- The two scratch tables live for the connection (created on first use, emptied at commit), so
-- a flush does not create catalog entries.
CREATE OR REPLACE FUNCTION record_hits(p_tenant uuid[], p_campaign uuid[], p_reader bigint[], p_link bigint[], p_click boolean[], p_prefetch boolean[], p_at timestamp with time zone[])
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
DECLARE
    batch hit_row[];
    firsts hit_first[] := '{}';
    more hit_first[];
BEGIN
    SELECT array_agg(ROW(u.t, u.c, r.id, nullif(u.l, 0), u.k, u.p, u.a)::hit_row) INTO batch
    FROM unnest(p_tenant, p_campaign, p_reader, p_link, p_click, p_prefetch, p_at) AS u(t, c, r, l, k, p, a)
    JOIN campaigns c ON c.id = u.c AND c.tenant_id = u.t
    -- A reader since merged into another copy of the same mailbox (mail sent before the merge)
    -- is that reader; an erased reader's hits are kept as anonymous counts.
    LEFT JOIN reader_aliases a ON a.tenant_id = u.t AND a.merged_id = u.r
    LEFT JOIN readers r ON r.id = coalesce(a.reader_id, u.r) AND r.tenant_id = u.t
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
END $function$;
REVOKE ALL ON FUNCTION record_hits(uuid[],uuid[],bigint[],bigint[],boolean[],boolean[],timestamp with time zone[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION record_hits(uuid[],uuid[],bigint[],bigint[],boolean[],boolean[],timestamp with time zone[]) TO herald_app;

-- A click token resolves to its URL only for a campaign that was sent (never a draft's links,
-- never another workspace's). Runs before any tenant is known, like the click itself.
CREATE OR REPLACE FUNCTION tracked_link(p_tenant uuid, p_campaign uuid, p_link bigint)
 RETURNS text
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    SELECT l.url FROM campaign_links l JOIN campaigns c ON c.id = l.campaign_id
    WHERE l.id = p_link AND l.campaign_id = p_campaign AND c.tenant_id = p_tenant AND l.tenant_id = p_tenant
      AND c.status IN ('sending', 'paused', 'sent', 'cancelled')
$function$;
REVOKE ALL ON FUNCTION tracked_link(uuid,uuid,bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tracked_link(uuid,uuid,bigint) TO herald_app;

-- Triggers

CREATE OR REPLACE TRIGGER events_engagement AFTER INSERT ON events REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION reader_engagement_apply();

CREATE OR REPLACE TRIGGER subscriptions_count_delete AFTER DELETE ON subscriptions REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION list_counts_apply();

CREATE OR REPLACE TRIGGER subscriptions_count_insert AFTER INSERT ON subscriptions REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION list_counts_apply();

CREATE OR REPLACE TRIGGER subscriptions_count_update AFTER UPDATE ON subscriptions REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION list_counts_apply();

CREATE OR REPLACE TRIGGER subscriptions_daily_insert AFTER INSERT ON subscriptions REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION audience_daily_insert();

CREATE OR REPLACE TRIGGER subscriptions_daily_update AFTER UPDATE ON subscriptions REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION audience_daily_apply();
