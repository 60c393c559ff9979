-- The web app and workers connect as `herald_app` (created by `herald migrate` before this runs,
-- because roles are cluster-wide). It is not the tables' owner, not superuser, not BYPASSRLS, so
-- row-level security applies to every query it runs. Tables created by the migrating role from
-- here on are readable and writable by it; nothing else is.
GRANT USAGE ON SCHEMA public TO herald_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO herald_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO herald_app;
-- /readyz compares the applied migrations with the ones compiled into the binary.
GRANT SELECT ON _sqlx_migrations TO herald_app;

-- The tenant and user of the current transaction, set with set_config(..., true) by the engine.
-- NULL when unset, so `tenant_id = app_tenant_id()` is never true outside a tenant transaction.
CREATE FUNCTION app_tenant_id() RETURNS uuid
    LANGUAGE sql STABLE
    AS $$ SELECT nullif(current_setting('app.tenant_id', true), '')::uuid $$;

CREATE FUNCTION app_user_id() RETURNS uuid
    LANGUAGE sql STABLE
    AS $$ SELECT nullif(current_setting('app.user_id', true), '')::uuid $$;
