CREATE TABLE memberships (
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('owner', 'admin', 'author', 'viewer')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id)
);
CREATE INDEX memberships_user_id_idx ON memberships (user_id);

ALTER TABLE memberships ENABLE ROW LEVEL SECURITY;
ALTER TABLE memberships FORCE ROW LEVEL SECURITY;
-- Inside a tenant: that tenant's members. Outside: a user may read (only) their own memberships,
-- which is what the workspace switcher needs.
CREATE POLICY memberships_read ON memberships FOR SELECT
    USING (tenant_id = app_tenant_id() OR user_id = app_user_id());
CREATE POLICY memberships_write ON memberships FOR ALL
    USING (tenant_id = app_tenant_id())
    WITH CHECK (tenant_id = app_tenant_id());

ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenants FORCE ROW LEVEL SECURITY;
CREATE POLICY tenants_read ON tenants FOR SELECT
    USING (id = app_tenant_id()
           OR EXISTS (SELECT 1 FROM memberships m WHERE m.tenant_id = tenants.id AND m.user_id = app_user_id()));
CREATE POLICY tenants_write ON tenants FOR ALL
    USING (id = app_tenant_id())
    WITH CHECK (id = app_tenant_id());

-- Public pages (/s/{workspace}) and operator commands name a workspace by slug before any tenant
-- is set; this answers only "which id has this slug".
CREATE FUNCTION tenant_id_for_slug(p_slug text) RETURNS uuid
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
    AS $$ SELECT id FROM tenants WHERE slug = lower(p_slug) $$;
REVOKE ALL ON FUNCTION tenant_id_for_slug(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tenant_id_for_slug(text) TO herald_app;
