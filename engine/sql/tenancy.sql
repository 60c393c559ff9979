-- Who a request acts for: the workspace and user a transaction is scoped to (row-level
-- security reads them), and the look-ups that must find a workspace before one is set (a public
-- page's slug, an API key, a provider webhook's token). Called from engine/src/infra/db.rs,
-- engine/src/api_keys.rs and engine/src/webhooks/.
--
-- The one current text of these functions and triggers: `herald migrate` applies this file
-- after the schema migrations when it has changed. Edit here, never in a migration (a
-- changed signature needs its DROP FUNCTION in a migration first). See docs/database.md.

-- The tenant and user of the current transaction, set with set_config(..., true) by the engine.
-- NULL when unset, so `tenant_id = app_tenant_id()` is never true outside a tenant transaction.
CREATE OR REPLACE FUNCTION app_tenant_id()
 RETURNS uuid
 LANGUAGE sql
 STABLE
AS $function$ SELECT nullif(current_setting('app.tenant_id', true), '')::uuid $function$;

CREATE OR REPLACE FUNCTION app_user_id()
 RETURNS uuid
 LANGUAGE sql
 STABLE
AS $function$ SELECT nullif(current_setting('app.user_id', true), '')::uuid $function$;

-- `standing`: 'ok', or why the key may not act now ('maker_not_admin', 'suspended').
CREATE OR REPLACE FUNCTION authenticate_api_key(p_key_hash text)
 RETURNS TABLE(key_id uuid, tenant_id uuid, role text, standing text)
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
        UPDATE api_keys k SET last_used_at = now()
        WHERE k.key_hash = p_key_hash AND k.revoked_at IS NULL
        RETURNING k.id, k.tenant_id, k.role,
            CASE
                WHEN EXISTS (SELECT 1 FROM tenants t WHERE t.id = k.tenant_id AND t.suspended_at IS NOT NULL)
                    THEN 'suspended'
                WHEN k.created_by IS NULL THEN 'ok'
                WHEN EXISTS (SELECT 1 FROM users u WHERE u.id = k.created_by AND u.suspended_at IS NOT NULL)
                    THEN 'suspended'
                WHEN NOT EXISTS (SELECT 1 FROM memberships m WHERE m.tenant_id = k.tenant_id
                                 AND m.user_id = k.created_by AND m.role IN ('owner', 'admin'))
                    THEN 'maker_not_admin'
                ELSE 'ok'
            END
    $function$;
REVOKE ALL ON FUNCTION authenticate_api_key(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION authenticate_api_key(text) TO herald_app;

-- Public pages (/s/{workspace}) and operator commands name a workspace by slug before any tenant
-- is set; this answers only "which id has this slug".
CREATE OR REPLACE FUNCTION tenant_id_for_slug(p_slug text)
 RETURNS uuid
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$ SELECT id FROM tenants WHERE slug = lower(p_slug) $function$;
REVOKE ALL ON FUNCTION tenant_id_for_slug(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tenant_id_for_slug(text) TO herald_app;

-- Webhooks name an identity by its token before any tenant is known.
CREATE OR REPLACE FUNCTION webhook_identity(p_token text)
 RETURNS TABLE(tenant_id uuid, identity_id uuid, provider text, secret_sealed text, sns_topic text)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    SELECT i.tenant_id, i.id, i.webhook_provider, i.webhook_secret_sealed, i.webhook_sns_topic FROM sending_identities i
    WHERE i.webhook_token = p_token AND i.webhook_provider IS NOT NULL
$function$;
REVOKE ALL ON FUNCTION webhook_identity(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_identity(text) TO herald_app;
