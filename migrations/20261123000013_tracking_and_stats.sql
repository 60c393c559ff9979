-- Tracking (opens, clicks), provider webhooks (delivered, bounces, complaints, unsubscribes),
-- and the rollups the stats pages read. Stats never scan `events` or `sends` on a page view:
-- every figure comes from a counter maintained when the event is recorded.

-- Per campaign: 'on' (per reader), 'anonymous' (counts only: tokens carry no reader id) or 'off'.
ALTER TABLE campaigns
    ADD COLUMN tracking text NOT NULL DEFAULT 'on' CHECK (tracking IN ('on', 'anonymous', 'off'));

-- N soft bounces within the window suppress an address.
ALTER TABLE tenants
    ADD COLUMN soft_bounce_limit int NOT NULL DEFAULT 3 CHECK (soft_bounce_limit BETWEEN 1 AND 100),
    ADD COLUMN soft_bounce_window_days int NOT NULL DEFAULT 30 CHECK (soft_bounce_window_days BETWEEN 1 AND 365);

-- Provider webhooks arrive at /webhooks/{provider}/{webhook_token}. The token only routes the
-- request to an identity (and so a workspace); authenticity comes from the provider's
-- signature, checked with the sealed secret (its meaning depends on the provider).
ALTER TABLE sending_identities
    ADD COLUMN webhook_provider text CHECK (webhook_provider IN ('ses', 'sendgrid', 'postmark', 'mailgun', 'generic')),
    ADD COLUMN webhook_token text UNIQUE,
    ADD COLUMN webhook_secret_sealed text;

ALTER TABLE suppressions DROP CONSTRAINT suppressions_reason_check;
ALTER TABLE suppressions ADD CONSTRAINT suppressions_reason_check
    CHECK (reason IN ('hard_bounce', 'soft_bounce', 'complaint', 'manual', 'unsubscribed_all'));

-- What happened to each message after the 250. `provider_id` is the id the SMTP server gave in
-- its reply ("250 Ok: queued as X"), which SES and Postmark webhooks quote instead of our
-- Message-ID. Each first-time column moves once, so its counter moves once.
ALTER TABLE sends
    ADD COLUMN provider_id text,
    ADD COLUMN delivered_at timestamptz,
    ADD COLUMN soft_bounces int NOT NULL DEFAULT 0,
    ADD COLUMN complained_at timestamptz,
    ADD COLUMN opened_at timestamptz,
    ADD COLUMN clicked_at timestamptz;
CREATE INDEX sends_provider_idx ON sends (provider_id) WHERE provider_id IS NOT NULL;

-- record_sent now also keeps the provider's id.
DROP FUNCTION record_sent(uuid, bigint, text);
CREATE FUNCTION record_sent(p_tenant uuid, p_send bigint, p_reply text, p_provider_id text) RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM set_config('app.tenant_id', p_tenant::text, true);
    UPDATE sends SET status = 'sent', sent_at = now(), smtp_reply = p_reply, provider_id = p_provider_id, reason = NULL,
                     lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
    WHERE tenant_id = p_tenant AND id = p_send AND status IN ('sending', 'queued');
    RETURN FOUND;
END $$;

-- The links of a sent campaign. A click token names a link id; the redirect goes only to the URL
-- registered here, never to one taken from the request.
CREATE TABLE campaign_links (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id     uuid NOT NULL,
    campaign_id   uuid NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    url           text NOT NULL,
    clicks        bigint NOT NULL DEFAULT 0,
    unique_clicks bigint NOT NULL DEFAULT 0,
    UNIQUE (campaign_id, url)
);

-- Every tracked or reported event. Append-only, written in batches. No primary key: nothing
-- looks an event up by id, and each index costs the firehose.
CREATE TABLE events (
    id          bigint GENERATED ALWAYS AS IDENTITY,
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    campaign_id uuid REFERENCES campaigns (id) ON DELETE CASCADE,
    reader_id   bigint REFERENCES readers (id) ON DELETE CASCADE,
    kind        text NOT NULL
                CHECK (kind IN ('open', 'click', 'delivered', 'bounce_hard', 'bounce_soft', 'complaint', 'unsubscribe')),
    link_id     bigint,
    -- An open by a privacy proxy that fetches every image (Apple Mail Privacy Protection).
    prefetch    boolean NOT NULL DEFAULT false,
    -- Provider and diagnostic for webhook events.
    detail      text,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_campaign_idx ON events (campaign_id, at);
CREATE INDEX events_reader_idx ON events (reader_id, at);
CREATE INDEX events_tenant_idx ON events (tenant_id, at);

-- Counters per campaign. `sent`/`failed` are added by the delivery loops every few seconds and
-- replaced by exact figures (`final`) when the send ends; the progress counts are frozen then too.
CREATE TABLE campaign_stats (
    campaign_id    uuid PRIMARY KEY REFERENCES campaigns (id) ON DELETE CASCADE,
    tenant_id      uuid NOT NULL,
    sent           bigint NOT NULL DEFAULT 0,
    failed         bigint NOT NULL DEFAULT 0,
    delivered      bigint NOT NULL DEFAULT 0,
    hard_bounces   bigint NOT NULL DEFAULT 0,
    soft_bounces   bigint NOT NULL DEFAULT 0,
    complaints     bigint NOT NULL DEFAULT 0,
    unsubscribes   bigint NOT NULL DEFAULT 0,
    opens          bigint NOT NULL DEFAULT 0,
    unique_opens   bigint NOT NULL DEFAULT 0,
    prefetch_opens bigint NOT NULL DEFAULT 0,
    clicks         bigint NOT NULL DEFAULT 0,
    unique_clicks  bigint NOT NULL DEFAULT 0,
    -- The send log's counts per status when the send ended (NULL while it runs).
    final_counts   jsonb,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE campaign_stats_hourly (
    campaign_id   uuid NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    tenant_id     uuid NOT NULL,
    hour          timestamptz NOT NULL,
    opens         bigint NOT NULL DEFAULT 0,
    unique_opens  bigint NOT NULL DEFAULT 0,
    clicks        bigint NOT NULL DEFAULT 0,
    unique_clicks bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (campaign_id, hour)
);

CREATE TABLE campaign_domain_stats (
    campaign_id   uuid NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    tenant_id     uuid NOT NULL,
    domain        text NOT NULL,
    sent          bigint NOT NULL DEFAULT 0,
    failed        bigint NOT NULL DEFAULT 0,
    bounced       bigint NOT NULL DEFAULT 0,
    complaints    bigint NOT NULL DEFAULT 0,
    unique_opens  bigint NOT NULL DEFAULT 0,
    unique_clicks bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (campaign_id, domain)
);

-- Subscriptions gained and lost per day, for the dashboard's growth chart.
CREATE TABLE audience_daily (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    day          date NOT NULL,
    subscribes   bigint NOT NULL DEFAULT 0,
    unsubscribes bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, day)
);

-- Provider event ids already applied: a replayed webhook has exactly one effect.
CREATE TABLE webhook_events (
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    provider    text NOT NULL,
    event_id    text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, provider, event_id)
);
CREATE INDEX webhook_events_received_idx ON webhook_events (received_at);

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['campaign_links', 'events', 'campaign_stats', 'campaign_stats_hourly',
                             'campaign_domain_stats', 'audience_daily', 'webhook_events'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY %I ON %I FOR ALL USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id())', t || '_tenant', t);
    END LOOP;
END $$;
-- The event log is evidence: the app appends, it never rewrites.
REVOKE UPDATE ON events FROM herald_app;

-- Growth rollup, folded per statement like list_counts: a subscription becoming confirmed is a
-- subscribe, becoming unsubscribed an unsubscribe.
CREATE FUNCTION audience_daily_apply() RETURNS trigger LANGUAGE plpgsql AS $$
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
END $$;
-- An INSERT trigger has no OLD TABLE to compare with, hence its own function.
CREATE FUNCTION audience_daily_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO audience_daily AS a (tenant_id, day, subscribes, unsubscribes)
    SELECT n.tenant_id, (now() AT TIME ZONE 'UTC')::date,
           count(*) FILTER (WHERE n.status = 'confirmed'), count(*) FILTER (WHERE n.status = 'unsubscribed')
    FROM new_rows n WHERE n.status IN ('confirmed', 'unsubscribed')
    GROUP BY 1 ORDER BY 1
    ON CONFLICT (tenant_id, day) DO UPDATE
        SET subscribes = a.subscribes + excluded.subscribes, unsubscribes = a.unsubscribes + excluded.unsubscribes;
    RETURN NULL;
END $$;
CREATE TRIGGER subscriptions_daily_insert AFTER INSERT ON subscriptions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION audience_daily_insert();
CREATE TRIGGER subscriptions_daily_update AFTER UPDATE ON subscriptions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION audience_daily_apply();

INSERT INTO audience_daily (tenant_id, day, subscribes, unsubscribes)
SELECT tenant_id, day, sum(s), sum(u) FROM (
    SELECT tenant_id, (confirmed_at AT TIME ZONE 'UTC')::date AS day, 1 AS s, 0 AS u FROM subscriptions WHERE confirmed_at IS NOT NULL
    UNION ALL
    SELECT tenant_id, (unsubscribed_at AT TIME ZONE 'UTC')::date, 0, 1 FROM subscriptions WHERE unsubscribed_at IS NOT NULL
) x GROUP BY 1, 2;

-- Opens and clicks from every workspace arrive in one batch, so this runs as the owner; each
-- hit was authenticated by its HMAC token (per-workspace key) and is kept only if the campaign
-- belongs to the workspace the token names and a clicked link belongs to the campaign.
-- The two scratch tables live for the connection (created on first use, emptied at commit), so
-- a flush does not create catalog entries.
CREATE FUNCTION record_hits(p_tenant uuid[], p_campaign uuid[], p_reader bigint[], p_link bigint[],
                            p_click boolean[], p_prefetch boolean[], p_at timestamptz[]) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE stored bigint;
BEGIN
    IF to_regclass('pg_temp.hits_batch') IS NULL THEN
        CREATE TEMP TABLE hits_batch (tenant_id uuid, campaign_id uuid, reader_id bigint, link_id bigint,
                                      click boolean, prefetch boolean, at timestamptz) ON COMMIT DELETE ROWS;
        CREATE TEMP TABLE hits_firsts (kind text, tenant_id uuid, campaign_id uuid, link_id bigint, domain text,
                                       at timestamptz) ON COMMIT DELETE ROWS;
    END IF;
    INSERT INTO hits_batch (tenant_id, campaign_id, reader_id, link_id, click, prefetch, at)
    SELECT u.t, u.c, r.id, nullif(u.l, 0), u.k, u.p, u.a
    FROM unnest(p_tenant, p_campaign, p_reader, p_link, p_click, p_prefetch, p_at) AS u(t, c, r, l, k, p, a)
    JOIN campaigns c ON c.id = u.c AND c.tenant_id = u.t
    -- An erased reader's hits are kept as anonymous counts.
    LEFT JOIN readers r ON r.id = u.r AND r.tenant_id = u.t
    WHERE (NOT u.k OR EXISTS (SELECT 1 FROM campaign_links l WHERE l.id = u.l AND l.campaign_id = u.c));
    GET DIAGNOSTICS stored = ROW_COUNT;
    IF stored = 0 THEN
        RETURN 0;
    END IF;

    -- Each reader's first click on each link, counted before this batch joins the log.
    INSERT INTO hits_firsts (kind, tenant_id, campaign_id, link_id)
    SELECT 'link', x.tenant_id, x.campaign_id, x.link_id FROM (
        SELECT DISTINCT h.tenant_id, h.campaign_id, h.reader_id, h.link_id FROM hits_batch h
        WHERE h.click AND h.reader_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM events e WHERE e.reader_id = h.reader_id AND e.campaign_id = h.campaign_id
                          AND e.kind = 'click' AND e.link_id = h.link_id)
    ) x;

    INSERT INTO events (tenant_id, campaign_id, reader_id, kind, link_id, prefetch, at)
    SELECT tenant_id, campaign_id, reader_id, CASE WHEN click THEN 'click' ELSE 'open' END, link_id, prefetch, at
    FROM hits_batch;

    -- First opens (a click counts as an open: images were blocked; prefetches never count) and
    -- first clicks. `IS NULL` is re-checked on the latest row version, so two flushers racing
    -- on one reader count it once.
    WITH firsts AS (
        UPDATE sends s SET opened_at = x.at
        FROM (SELECT campaign_id, reader_id, min(at) AS at FROM hits_batch
              WHERE reader_id IS NOT NULL AND NOT prefetch GROUP BY 1, 2) x
        WHERE s.reader_id = x.reader_id AND s.campaign_id = x.campaign_id AND s.opened_at IS NULL
        RETURNING s.tenant_id, s.campaign_id, split_part(s.email, '@', 2) AS domain, s.opened_at AS at
    )
    INSERT INTO hits_firsts (kind, tenant_id, campaign_id, domain, at) SELECT 'open', * FROM firsts;
    WITH firsts AS (
        UPDATE sends s SET clicked_at = x.at
        FROM (SELECT campaign_id, reader_id, min(at) AS at FROM hits_batch
              WHERE reader_id IS NOT NULL AND click GROUP BY 1, 2) x
        WHERE s.reader_id = x.reader_id AND s.campaign_id = x.campaign_id AND s.clicked_at IS NULL
        RETURNING s.tenant_id, s.campaign_id, split_part(s.email, '@', 2) AS domain, s.clicked_at AS at
    )
    INSERT INTO hits_firsts (kind, tenant_id, campaign_id, domain, at) SELECT 'click', * FROM firsts;

    INSERT INTO campaign_stats AS s (campaign_id, tenant_id, opens, unique_opens, prefetch_opens, clicks, unique_clicks)
    SELECT campaign_id, tenant_id, sum(opens), sum(unique_opens), sum(prefetch_opens), sum(clicks), sum(unique_clicks)
    FROM (
        SELECT campaign_id, tenant_id, count(*) FILTER (WHERE NOT click AND NOT prefetch) AS opens, 0 AS unique_opens,
               count(*) FILTER (WHERE NOT click AND prefetch) AS prefetch_opens, count(*) FILTER (WHERE click) AS clicks,
               0 AS unique_clicks
        FROM hits_batch GROUP BY 1, 2
        UNION ALL
        SELECT campaign_id, tenant_id, 0, count(*) FILTER (WHERE kind = 'open'), 0, 0, count(*) FILTER (WHERE kind = 'click')
        FROM hits_firsts WHERE kind IN ('open', 'click') GROUP BY 1, 2
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
        FROM hits_batch GROUP BY 1, 2, 3
        UNION ALL
        SELECT campaign_id, tenant_id, date_trunc('hour', at), 0, count(*) FILTER (WHERE kind = 'open'), 0,
               count(*) FILTER (WHERE kind = 'click')
        FROM hits_firsts WHERE kind IN ('open', 'click') GROUP BY 1, 2, 3
    ) x GROUP BY 1, 2, 3 ORDER BY 1, 3
    ON CONFLICT (campaign_id, hour) DO UPDATE SET
        opens = s.opens + excluded.opens, unique_opens = s.unique_opens + excluded.unique_opens,
        clicks = s.clicks + excluded.clicks, unique_clicks = s.unique_clicks + excluded.unique_clicks;

    INSERT INTO campaign_domain_stats AS s (campaign_id, tenant_id, domain, unique_opens, unique_clicks)
    SELECT campaign_id, tenant_id, domain, count(*) FILTER (WHERE kind = 'open'), count(*) FILTER (WHERE kind = 'click')
    FROM hits_firsts WHERE kind IN ('open', 'click') GROUP BY 1, 2, 3 ORDER BY 1, 3
    ON CONFLICT (campaign_id, domain) DO UPDATE SET
        unique_opens = s.unique_opens + excluded.unique_opens, unique_clicks = s.unique_clicks + excluded.unique_clicks;

    UPDATE campaign_links l SET clicks = l.clicks + x.clicks, unique_clicks = l.unique_clicks + x.uniq
    FROM (SELECT link_id, sum(clicks) AS clicks, sum(uniq) AS uniq FROM (
              SELECT link_id, count(*) AS clicks, 0 AS uniq FROM hits_batch WHERE click GROUP BY 1
              UNION ALL
              SELECT link_id, 0, count(*) FROM hits_firsts WHERE kind = 'link' GROUP BY 1
          ) y GROUP BY 1 ORDER BY 1) x
    WHERE l.id = x.link_id;

    -- Emptied now as well as at commit: the caller's transaction is the flush's own.
    DELETE FROM hits_batch;
    DELETE FROM hits_firsts;
    RETURN stored;
END $$;
REVOKE ALL ON FUNCTION record_hits(uuid[], uuid[], bigint[], bigint[], boolean[], boolean[], timestamptz[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION record_hits(uuid[], uuid[], bigint[], bigint[], boolean[], boolean[], timestamptz[]) TO herald_app;

-- A click token resolves to its URL only for a campaign that was sent (never a draft's links,
-- never another workspace's). Runs before any tenant is known, like the click itself.
CREATE FUNCTION tracked_link(p_tenant uuid, p_campaign uuid, p_link bigint) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT l.url FROM campaign_links l JOIN campaigns c ON c.id = l.campaign_id
    WHERE l.id = p_link AND l.campaign_id = p_campaign AND c.tenant_id = p_tenant AND l.tenant_id = p_tenant
      AND c.status IN ('sending', 'paused', 'sent', 'cancelled')
$$;
REVOKE ALL ON FUNCTION tracked_link(uuid, uuid, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tracked_link(uuid, uuid, bigint) TO herald_app;

-- Webhooks name an identity by its token before any tenant is known.
CREATE FUNCTION webhook_identity(p_token text) RETURNS TABLE (tenant_id uuid, identity_id uuid, provider text, secret_sealed text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT i.tenant_id, i.id, i.webhook_provider, i.webhook_secret_sealed FROM sending_identities i
    WHERE i.webhook_token = p_token AND i.webhook_provider IS NOT NULL
$$;
REVOKE ALL ON FUNCTION webhook_identity(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_identity(text) TO herald_app;

-- Stats for campaigns that finished before this migration.
INSERT INTO campaign_stats (campaign_id, tenant_id) SELECT id, tenant_id FROM campaigns;
