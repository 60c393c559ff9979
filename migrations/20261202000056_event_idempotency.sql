-- A reader event sent with an `Idempotency-Key` enters its automations once: the key, the hash of
-- the request it came with and the answer given are stored in the same transaction as the entry,
-- so a client that retries after a lost reply gets the first answer, and the same key with
-- another request is refused. Kept at least 24 hours (`automations::events` clears a workspace's
-- keys older than seven days as it records new ones).
CREATE TABLE event_requests (
    tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    idempotency_key text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    request_sha256  text NOT NULL,
    response        jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, idempotency_key)
);
CREATE INDEX event_requests_age_idx ON event_requests (tenant_id, created_at);
ALTER TABLE event_requests ENABLE ROW LEVEL SECURITY;
ALTER TABLE event_requests FORCE ROW LEVEL SECURITY;
CREATE POLICY event_requests_tenant ON event_requests FOR ALL
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
