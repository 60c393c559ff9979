-- Campaigns and the send engine. The send log (`sends`) is the idempotency record: one row per
-- (campaign, reader), claimed with a lease, acknowledged only after the SMTP server's 250.

-- Workspace sending policy (seed 004): at most one campaign email per reader per N hours (off
-- when NULL), and how long a queued message may wait before it expires instead of sending, so
-- an outage never ends in a burst.
ALTER TABLE tenants
    ADD COLUMN frequency_cap_hours int CHECK (frequency_cap_hours BETWEEN 1 AND 8760),
    ADD COLUMN max_queue_age_hours int NOT NULL DEFAULT 48 CHECK (max_queue_age_hours BETWEEN 1 AND 8760);

-- The last campaign email each reader was sent, updated atomically inside the claim.
ALTER TABLE readers
    ADD COLUMN last_campaign_at timestamptz,
    ADD COLUMN last_campaign_id uuid;

CREATE TABLE sending_identities (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name            text NOT NULL,
    -- The SMTP URL including credentials, sealed with a key derived from the server secret.
    smtp_url_sealed text NOT NULL,
    -- The same URL without credentials, for display.
    smtp_display    text NOT NULL,
    max_connections int NOT NULL DEFAULT 4 CHECK (max_connections BETWEEN 1 AND 64),
    rate_per_second double precision NOT NULL DEFAULT 10 CHECK (rate_per_second > 0),
    burst           int NOT NULL DEFAULT 10 CHECK (burst BETWEEN 1 AND 10000),
    dkim_domain     text,
    dkim_selector   text,
    dkim_key_sealed text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);

CREATE TABLE campaigns (
    id               uuid PRIMARY KEY,
    tenant_id        uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name             text NOT NULL,
    subject          text NOT NULL DEFAULT '',
    preheader        text NOT NULL DEFAULT '',
    identity_id      uuid REFERENCES sending_identities (id) ON DELETE SET NULL,
    from_name        text NOT NULL DEFAULT '',
    from_email       text NOT NULL DEFAULT '',
    reply_to         text NOT NULL DEFAULT '',
    list_ids         uuid[] NOT NULL DEFAULT '{}',
    attribute_filter text NOT NULL DEFAULT '',
    body_format      text NOT NULL DEFAULT 'markdown' CHECK (body_format IN ('markdown', 'html')),
    body             text NOT NULL DEFAULT '',
    status           text NOT NULL DEFAULT 'draft'
                     CHECK (status IN ('draft', 'scheduled', 'sending', 'paused', 'sent', 'cancelled')),
    scheduled_at     timestamptz,
    schedule_tz      text NOT NULL DEFAULT 'UTC',
    -- Spread the send evenly over this many hours (seed 003); NULL sends as fast as allowed.
    spread_hours     double precision CHECK (spread_hours > 0),
    pause_reason     text,
    -- Fan-out progress: readers up to this id are in `sends`; done when the walk ended.
    fanout_cursor    bigint NOT NULL DEFAULT 0,
    fanout_done      boolean NOT NULL DEFAULT false,
    recipients       bigint NOT NULL DEFAULT 0,
    -- Refreshed by whichever job is working on the campaign; a stale one makes the supervisor
    -- enqueue fresh jobs (a worker killed with -9 leaves its apalis job orphaned for minutes).
    heartbeat_at     timestamptz,
    started_at       timestamptz,
    finished_at      timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX campaigns_tenant_idx ON campaigns (tenant_id, created_at DESC);
CREATE INDEX campaigns_active_idx ON campaigns (status, scheduled_at) WHERE status IN ('scheduled', 'sending');

CREATE TABLE sends (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id        uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    campaign_id      uuid NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    reader_id        bigint NOT NULL REFERENCES readers (id) ON DELETE CASCADE,
    email            text NOT NULL,
    status           text NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('queued', 'sending', 'sent', 'failed', 'skipped', 'cancelled', 'expired')),
    attempts         int NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_owner      text,
    lease_expires_at timestamptz,
    -- Times a lease expired while the SMTP transaction may have completed: re-sent with the
    -- same Message-ID so receivers can deduplicate.
    ambiguous        int NOT NULL DEFAULT 0,
    hard_bounce      boolean NOT NULL DEFAULT false,
    reason           text,
    smtp_reply       text,
    sent_at          timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    -- Reader first: erasing a reader cascades here through this index (a campaign-first key
    -- would scan the whole send log per erased reader), and the reader's history uses it.
    -- `ON CONFLICT (campaign_id, reader_id)` infers it all the same.
    UNIQUE (reader_id, campaign_id)
);
CREATE INDEX sends_claim_idx ON sends (campaign_id, id) WHERE status = 'queued';
CREATE INDEX sends_lease_idx ON sends (lease_expires_at) WHERE status = 'sending';
CREATE INDEX sends_status_idx ON sends (campaign_id, status);

-- Token buckets (GCRA: one "theoretical arrival time" per key) shared by every worker process:
-- per sending identity, per campaign spread. Keys carry no personal data.
CREATE TABLE rate_buckets (
    key text PRIMARY KEY,
    tat timestamptz NOT NULL DEFAULT now()
);

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['sending_identities', 'campaigns', 'sends'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY %I ON %I FOR ALL USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id())', t || '_tenant', t);
    END LOOP;
END $$;

-- The supervisor works across workspaces before it knows a tenant; these narrow functions are
-- the only cross-tenant paths. Each returns ids only, and every later step runs in a tenant
-- transaction under RLS.

-- Scheduled campaigns whose time has come, moved to `sending` by compare-and-set (one winner
-- however many supervisors run).
CREATE FUNCTION start_due_campaigns() RETURNS TABLE (tenant_id uuid, campaign_id uuid)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    UPDATE campaigns c SET status = 'sending', started_at = coalesce(c.started_at, now()), updated_at = now(),
                           heartbeat_at = now()
    WHERE c.status = 'scheduled' AND c.scheduled_at <= now()
    RETURNING c.tenant_id, c.id
$$;

-- Sending campaigns nobody has worked on for `stale`; claims them for the caller by refreshing
-- the heartbeat, so only one supervisor re-enqueues jobs.
CREATE FUNCTION claim_stalled_campaigns(stale interval) RETURNS TABLE (tenant_id uuid, campaign_id uuid, fanout_done boolean)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    UPDATE campaigns c SET heartbeat_at = now()
    WHERE c.status = 'sending' AND (c.heartbeat_at IS NULL OR c.heartbeat_at < now() - stale)
    RETURNING c.tenant_id, c.id, c.fanout_done
$$;

-- Rows whose lease expired (the worker died or stalled) go back to the queue. The SMTP
-- transaction may have completed, so each is counted as ambiguous and re-sent later with the
-- same Message-ID.
CREATE FUNCTION reap_expired_leases() RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH reaped AS (
        UPDATE sends SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL,
                         ambiguous = ambiguous + 1, updated_at = now()
        WHERE status = 'sending' AND lease_expires_at < now()
        RETURNING 1
    )
    SELECT count(*) FROM reaped
$$;

REVOKE ALL ON FUNCTION start_due_campaigns() FROM PUBLIC;
REVOKE ALL ON FUNCTION claim_stalled_campaigns(interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION reap_expired_leases() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION start_due_campaigns() TO herald_app;
GRANT EXECUTE ON FUNCTION claim_stalled_campaigns(interval) TO herald_app;
GRANT EXECUTE ON FUNCTION reap_expired_leases() TO herald_app;

-- The delivery hot path records each 250 in one round trip instead of four (BEGIN, set tenant,
-- UPDATE, COMMIT). Not SECURITY DEFINER: it runs as the caller, sets the tenant for its own
-- implicit transaction, and row-level security applies to the UPDATE as everywhere else. A
-- row the reaper already requeued is still marked sent: the message did go out.
CREATE FUNCTION record_sent(p_tenant uuid, p_send bigint, p_reply text) RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM set_config('app.tenant_id', p_tenant::text, true);
    UPDATE sends SET status = 'sent', sent_at = now(), smtp_reply = p_reply, reason = NULL,
                     lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
    WHERE tenant_id = p_tenant AND id = p_send AND status IN ('sending', 'queued');
    RETURN FOUND;
END $$;
