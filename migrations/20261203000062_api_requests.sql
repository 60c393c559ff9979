-- The first answer to each API request sent with an `Idempotency-Key` (every POST but the two
-- whose handlers keep keys in their own transaction: transactional messages and reader
-- events). The key is claimed, and committed, before the request runs, so a concurrent or later
-- copy never runs it a second time; `status` stays NULL until the answer is stored. A request
-- that failed for a passing reason (5xx, 429) gives its key back. See
-- engine/src/api_requests.rs.
CREATE TABLE api_requests (
    tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    idempotency_key text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    request_sha256  text NOT NULL,
    status          smallint CHECK (status BETWEEN 100 AND 599),
    content_type    text,
    body            bytea,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, idempotency_key)
);
-- For clearing a workspace's old keys as it claims new ones.
CREATE INDEX api_requests_age_idx ON api_requests (tenant_id, created_at);
ALTER TABLE api_requests ENABLE ROW LEVEL SECURITY;
ALTER TABLE api_requests FORCE ROW LEVEL SECURITY;
CREATE POLICY api_requests_tenant ON api_requests FOR ALL
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
