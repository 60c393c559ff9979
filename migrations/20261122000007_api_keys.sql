CREATE TABLE api_keys (
    id           uuid PRIMARY KEY,
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name         text NOT NULL,
    prefix       text NOT NULL,
    key_hash     text NOT NULL UNIQUE,
    created_by   uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX api_keys_tenant_id_idx ON api_keys (tenant_id, created_at DESC);

ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE api_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY api_keys_tenant ON api_keys FOR ALL
    USING (tenant_id = app_tenant_id())
    WITH CHECK (tenant_id = app_tenant_id());

-- A bearer key arrives before its tenant is known. This one narrow door (owned by the migrating
-- role, so it runs past RLS) answers "which tenant does this unrevoked key hash belong to" and
-- records the use; it reveals nothing else.
CREATE FUNCTION authenticate_api_key(p_key_hash text)
    RETURNS TABLE (key_id uuid, tenant_id uuid)
    LANGUAGE sql SECURITY DEFINER SET search_path = public
    AS $$
        UPDATE api_keys SET last_used_at = now()
        WHERE key_hash = p_key_hash AND revoked_at IS NULL
        RETURNING id, tenant_id
    $$;
REVOKE ALL ON FUNCTION authenticate_api_key(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION authenticate_api_key(text) TO herald_app;
