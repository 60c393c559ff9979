-- Outbound webhooks: a workspace's endpoints, the events that happened in it (written by
-- triggers in the same transaction as the change, and only when an enabled endpoint of that
-- workspace is subscribed to the event's type), and one delivery per event and endpoint, which
-- the workers send, sign (Standard Webhooks) and retry. See engine/src/outbound_webhooks/ and
-- engine/sql/webhooks.sql.

CREATE TABLE webhook_endpoints (
    tenant_id           uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id                  uuid NOT NULL,
    url                 text NOT NULL CHECK (length(url) BETWEEN 8 AND 2000),
    description         text NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    -- Exact event types (`reader.subscribed`); the API and the page expand `reader.*`.
    event_types         text[] NOT NULL CHECK (cardinality(event_types) >= 1),
    enabled             boolean NOT NULL DEFAULT true,
    -- Sealed (engine/src/infra/sealing.rs) `whsec_…` secrets. During a rotation the previous
    -- one signs too, until `previous_secret_until`.
    secret              text NOT NULL,
    previous_secret     text,
    previous_secret_until timestamptz,
    -- Since when every attempt has failed (cleared by a delivery); after 72 hours Herald
    -- disables the endpoint and says why in `disabled_reason`.
    failing_since       timestamptz,
    disabled_reason     text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

CREATE TABLE outbound_events (
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id          uuid NOT NULL DEFAULT gen_random_uuid(),
    type        text NOT NULL,
    -- The event's `data` object; the envelope (id, type, timestamp, schema version) is added
    -- when it is sent, the same on every attempt.
    data        jsonb NOT NULL,
    -- The reader it is about, so erasing them purges what was not yet delivered.
    reader_id   bigint,
    occurred_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX outbound_events_reader_idx ON outbound_events (tenant_id, reader_id) WHERE reader_id IS NOT NULL;
CREATE INDEX outbound_events_age_idx ON outbound_events (occurred_at);

CREATE TABLE outbound_deliveries (
    tenant_id       uuid NOT NULL,
    endpoint_id     uuid NOT NULL,
    event_id        uuid NOT NULL,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    -- When it is due; a claim moves it a lease ahead, so a worker that dies mid-attempt leaves
    -- it due again when the lease runs out.
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_attempt_at timestamptz,
    last_status     smallint,
    last_error      text,
    last_latency_ms integer,
    -- The first 2 KiB of the receiver's last answer.
    last_response   text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    PRIMARY KEY (tenant_id, endpoint_id, event_id),
    FOREIGN KEY (tenant_id, endpoint_id) REFERENCES webhook_endpoints (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, event_id) REFERENCES outbound_events (tenant_id, id) ON DELETE CASCADE
);
-- The workers' claim: an endpoint's due deliveries, oldest first.
CREATE INDEX outbound_deliveries_due_idx ON outbound_deliveries (tenant_id, endpoint_id, next_attempt_at)
    WHERE state = 'pending';
-- The endpoint page's recent deliveries.
CREATE INDEX outbound_deliveries_recent_idx ON outbound_deliveries (tenant_id, endpoint_id, created_at DESC);
CREATE INDEX outbound_deliveries_event_idx ON outbound_deliveries (tenant_id, event_id);

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['webhook_endpoints', 'outbound_events', 'outbound_deliveries'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        -- The system role's policy (the workers' claims, events written by bulk work) is added
        -- by every migration run (`migrate::grant_system_role`).
        EXECUTE format('CREATE POLICY %I ON %I FOR ALL USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id())',
                       t || '_tenant', t);
    END LOOP;
END $$;
