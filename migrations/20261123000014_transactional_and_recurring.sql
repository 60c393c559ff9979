-- Issue 6: transactional messages (seed 001) and recurring personalised campaigns (seed 003).

-- ---------------------------------------------------------------------------------------------
-- Transactional mail
-- ---------------------------------------------------------------------------------------------

-- The identity transactional mail goes through (NULL: the server's default) and the sender used
-- when neither the request nor the template names one.
ALTER TABLE tenants
    ADD COLUMN transactional_identity_id uuid REFERENCES sending_identities (id) ON DELETE SET NULL,
    ADD COLUMN transactional_from_name text NOT NULL DEFAULT '',
    ADD COLUMN transactional_from_email text NOT NULL DEFAULT '';

-- Named templates; every save is a new version, and a message keeps the version it was made from.
CREATE TABLE tx_templates (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name            text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    description     text NOT NULL DEFAULT '',
    current_version int NOT NULL DEFAULT 1,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);

CREATE TABLE tx_template_versions (
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    template_id uuid NOT NULL REFERENCES tx_templates (id) ON DELETE CASCADE,
    version     int NOT NULL,
    from_name   text NOT NULL DEFAULT '',
    from_email  text NOT NULL DEFAULT '',
    reply_to    text NOT NULL DEFAULT '',
    subject     text NOT NULL,
    html        text NOT NULL DEFAULT '',
    text_body   text NOT NULL DEFAULT '',
    -- Sample variables for the preview.
    sample      jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (template_id, version)
);

-- One row per accepted API request. The content is rendered when the request arrives (template
-- errors are the caller's 422, never a failure hours later), so delivery only builds MIME.
CREATE TABLE messages (
    id               uuid PRIMARY KEY,
    tenant_id        uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    -- Replays of the same key return this row; a different body under the key is a 409.
    idempotency_key  text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    request_hash     text NOT NULL,
    to_email         text NOT NULL,
    to_name          text NOT NULL DEFAULT '',
    from_name        text NOT NULL DEFAULT '',
    from_email       text NOT NULL,
    reply_to         text NOT NULL DEFAULT '',
    subject          text NOT NULL,
    html             text NOT NULL,
    text_body        text NOT NULL,
    template_id      uuid REFERENCES tx_templates (id) ON DELETE SET NULL,
    template_version int,
    metadata         jsonb NOT NULL DEFAULT '{}',
    -- The tracked links, in order: a click token names an index into this array.
    links            text[] NOT NULL DEFAULT '{}',
    status           text NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('queued', 'sending', 'sent', 'failed', 'cancelled')),
    attempts         int NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_owner      text,
    lease_expires_at timestamptz,
    ambiguous        int NOT NULL DEFAULT 0,
    provider_id      text,
    smtp_reply       text,
    last_error       text,
    sent_at          timestamptz,
    delivered_at     timestamptz,
    opened_at        timestamptz,
    clicked_at       timestamptz,
    bounced_at       timestamptz,
    complained_at    timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, idempotency_key)
);
CREATE INDEX messages_due_idx ON messages (next_attempt_at) WHERE status = 'queued';
CREATE INDEX messages_lease_idx ON messages (lease_expires_at) WHERE status = 'sending';
CREATE INDEX messages_recent_idx ON messages (tenant_id, created_at DESC);
CREATE INDEX messages_recipient_idx ON messages (tenant_id, lower(to_email));
CREATE INDEX messages_provider_idx ON messages (provider_id) WHERE provider_id IS NOT NULL;

-- The message's history: queued, sent, deferred, failed, cancelled, and what providers and
-- readers reported (delivered, bounced, complained, opened, clicked).
CREATE TABLE message_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    message_id  uuid NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    kind        text NOT NULL,
    detail      text NOT NULL DEFAULT '',
    occurred_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX message_events_message_idx ON message_events (message_id, id);

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['tx_templates', 'tx_template_versions', 'messages', 'message_events'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY %I ON %I FOR ALL USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id())', t || '_tenant', t);
    END LOOP;
END $$;

-- The transactional sender works across workspaces; this is its one cross-tenant path. It
-- claims due messages (the caller's clock, so tests can move time) and returns what sending
-- needs, with the reason to skip a message whose address was suppressed after it was queued.
CREATE FUNCTION claim_messages(p_worker text, p_limit int, p_lease_secs float8, p_now timestamptz)
RETURNS TABLE (id uuid, tenant_id uuid, attempts int, skip text)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH picked AS (
        SELECT m.id FROM messages m
        WHERE m.status = 'queued' AND m.next_attempt_at <= p_now
        ORDER BY m.next_attempt_at LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE messages m SET status = 'sending', lease_owner = p_worker, attempts = m.attempts + 1,
                          lease_expires_at = now() + make_interval(secs => p_lease_secs), updated_at = now()
    FROM picked WHERE m.id = picked.id
    RETURNING m.id, m.tenant_id, m.attempts,
        (SELECT 'suppressed (' || x.reason || ')' FROM suppressions x
         WHERE x.tenant_id = m.tenant_id AND x.email_lower = lower(m.to_email) AND x.reason <> 'unsubscribed_all' LIMIT 1)
$$;

-- Messages whose sender died mid-send go back to the queue, counted as ambiguous: they are
-- re-sent with the same Message-ID, so receivers can deduplicate.
CREATE FUNCTION reap_expired_message_leases() RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH reaped AS (
        UPDATE messages SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL,
                            ambiguous = ambiguous + 1, updated_at = now()
        WHERE status = 'sending' AND lease_expires_at < now()
        RETURNING 1
    )
    SELECT count(*) FROM reaped
$$;

REVOKE ALL ON FUNCTION claim_messages(text, int, float8, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION reap_expired_message_leases() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION claim_messages(text, int, float8, timestamptz) TO herald_app;
GRANT EXECUTE ON FUNCTION reap_expired_message_leases() TO herald_app;

-- ---------------------------------------------------------------------------------------------
-- Recurring campaigns
-- ---------------------------------------------------------------------------------------------

-- A recurring campaign is a parent that never sends itself: at each slot of its schedule it
-- copies itself into an edition, an ordinary campaign with its own send log, so "once per reader
-- per edition" and crash recovery are the one-off engine's. UNIQUE (parent_id, edition_slot)
-- makes an edition per slot happen once however many supervisors race.
ALTER TABLE campaigns DROP CONSTRAINT campaigns_status_check;
ALTER TABLE campaigns ADD CONSTRAINT campaigns_status_check
    CHECK (status IN ('draft', 'scheduled', 'sending', 'paused', 'sent', 'cancelled', 'recurring'));
ALTER TABLE campaigns
    -- {"every": "day"|"week"|"month", "weekdays": [1..7, ISO], "month_day": 1..28, "time": "HH:MM", "tz": "Area/City"}
    ADD COLUMN recurrence jsonb,
    -- Where per-reader data comes from: none, pushed through the API, or fetched from a URL.
    ADD COLUMN feed text NOT NULL DEFAULT 'none' CHECK (feed IN ('none', 'api', 'url')),
    ADD COLUMN feed_url text NOT NULL DEFAULT '',
    ADD COLUMN parent_id uuid REFERENCES campaigns (id) ON DELETE SET NULL,
    ADD COLUMN edition_slot timestamptz,
    -- On a parent: the newest slot an edition was made for (or that was skipped as past).
    ADD COLUMN last_edition_slot timestamptz,
    ADD CONSTRAINT campaigns_edition_once UNIQUE (parent_id, edition_slot);
CREATE INDEX campaigns_recurring_idx ON campaigns (status) WHERE status = 'recurring';

-- Data for a reader's next edition, pushed through the API; an edition's fan-out moves it into the
-- reader's send-log row (so a resumed edition renders the same data) and removes it here.
CREATE TABLE campaign_feed (
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    campaign_id uuid NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    reader_id   bigint NOT NULL REFERENCES readers (id) ON DELETE CASCADE,
    data        jsonb NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (campaign_id, reader_id)
);
CREATE INDEX campaign_feed_reader_idx ON campaign_feed (reader_id);
ALTER TABLE campaign_feed ENABLE ROW LEVEL SECURITY;
ALTER TABLE campaign_feed FORCE ROW LEVEL SECURITY;
CREATE POLICY campaign_feed_tenant ON campaign_feed FOR ALL USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());

ALTER TABLE sends ADD COLUMN feed jsonb;

-- The newest slot of `rec` at or before `p_now`, in the schedule's time zone (Postgres's tz
-- database, so daylight-saving changes move the UTC instant, not the local time). NULL when the
-- schedule has no slot in the last 62 days.
CREATE FUNCTION recurrence_latest_slot(rec jsonb, p_now timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE SET search_path = public, pg_temp AS $$
    SELECT max(slot) FROM (
        SELECT (d::date + (rec->>'time')::time) AT TIME ZONE (rec->>'tz') AS slot, d
        FROM generate_series(((p_now AT TIME ZONE (rec->>'tz'))::date - 62)::timestamp,
                             (p_now AT TIME ZONE (rec->>'tz'))::date::timestamp, interval '1 day') AS d
    ) s
    WHERE slot <= p_now
      AND CASE rec->>'every'
              WHEN 'day' THEN true
              WHEN 'week' THEN extract(isodow FROM d)::int IN (SELECT jsonb_array_elements_text(rec->'weekdays')::int)
              WHEN 'month' THEN extract(day FROM d)::int = (rec->>'month_day')::int
              ELSE false
          END
$$;

-- Recurring campaigns with a slot due since their last edition: one row each, for the newest due
-- slot only (a server that was down over several slots sends one edition, not one per slot).
CREATE FUNCTION due_editions(p_now timestamptz) RETURNS TABLE (tenant_id uuid, campaign_id uuid, slot timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT c.tenant_id, c.id, s.slot
    FROM campaigns c CROSS JOIN LATERAL (SELECT recurrence_latest_slot(c.recurrence, p_now) AS slot) s
    WHERE c.status = 'recurring' AND s.slot IS NOT NULL
      AND (c.last_edition_slot IS NULL OR s.slot > c.last_edition_slot)
$$;
REVOKE ALL ON FUNCTION due_editions(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION due_editions(timestamptz) TO herald_app;
