-- Audit log (issue 17): who (a member or an API key) did what to which object, when and from
-- where. Append-only for the app: it may add rows and read its own workspace's, never change or
-- delete one (a deleted workspace takes its log with it through the foreign key).
CREATE TABLE audit_log (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    at            timestamptz NOT NULL DEFAULT now(),
    -- No foreign keys: the record outlives the account or key; `actor` keeps its name as it was.
    actor_user_id uuid,
    actor_key_id  uuid,
    actor         text NOT NULL,
    action        text NOT NULL,
    object        text NOT NULL DEFAULT '',
    detail        jsonb NOT NULL DEFAULT '{}',
    ip            text NOT NULL DEFAULT '',
    CHECK ((actor_user_id IS NULL) <> (actor_key_id IS NULL))
);
CREATE INDEX audit_log_tenant_idx ON audit_log (tenant_id, id DESC);
CREATE INDEX audit_log_tenant_action_idx ON audit_log (tenant_id, action, id DESC);

ALTER TABLE audit_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_log FORCE ROW LEVEL SECURITY;
CREATE POLICY audit_log_read ON audit_log FOR SELECT USING (tenant_id = app_tenant_id());
CREATE POLICY audit_log_append ON audit_log FOR INSERT WITH CHECK (tenant_id = app_tenant_id());
REVOKE UPDATE, DELETE, TRUNCATE ON audit_log FROM herald_app;
