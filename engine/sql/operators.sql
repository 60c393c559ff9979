-- Figures across accounts for the operator's CLI (`herald admin accounts`) and the storage
-- quotas (engine/src/account_limits.rs, engine/src/media/).
--
-- The one current text of these functions and triggers: `herald migrate` applies this file
-- after the schema migrations when it has changed. Edit here, never in a migration (a
-- changed signature needs its DROP FUNCTION in a migration first). See docs/database.md.

-- The operator's view of accounts (`herald admin accounts`): what each account's
-- workspaces sent over the last 24 hours and 7 days, with bounce and complaint counts, so abuse
-- shows before the relay blocks the shared domain. Across every workspace by nature, so a
-- definer function; it returns figures per account, no message content.
CREATE OR REPLACE FUNCTION account_activity(p_limit integer)
 RETURNS TABLE(account_id uuid, email text, suspended boolean, workspaces bigint, campaign_sent_1d bigint, campaign_sent_7d bigint, campaign_bounces_7d bigint, campaign_complaints_7d bigint, tx_sent_1d bigint, tx_sent_7d bigint, tx_bounces_7d bigint, tx_complaints_7d bigint)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    WITH per_tenant AS (
        SELECT t.account_id,
               count(*) AS workspaces,
               coalesce(sum(c.sent_1d), 0) AS campaign_sent_1d, coalesce(sum(c.sent_7d), 0) AS campaign_sent_7d,
               coalesce(sum(c.bounces_7d), 0) AS campaign_bounces_7d, coalesce(sum(c.complaints_7d), 0) AS campaign_complaints_7d,
               coalesce(sum(m.sent_1d), 0) AS tx_sent_1d, coalesce(sum(m.sent_7d), 0) AS tx_sent_7d,
               coalesce(sum(m.bounces_7d), 0) AS tx_bounces_7d, coalesce(sum(m.complaints_7d), 0) AS tx_complaints_7d
        FROM tenants t
        LEFT JOIN LATERAL (
            SELECT sum(s.sent) FILTER (WHERE x.started_at > now() - interval '1 day') AS sent_1d,
                   sum(s.sent) AS sent_7d,
                   sum(s.hard_bounces + s.soft_bounces) AS bounces_7d,
                   sum(s.complaints) AS complaints_7d
            FROM campaigns x JOIN campaign_stats s ON s.campaign_id = x.id
            WHERE x.tenant_id = t.id AND x.started_at > now() - interval '7 days'
        ) c ON true
        LEFT JOIN LATERAL (
            SELECT count(*) FILTER (WHERE q.sent_at > now() - interval '1 day') AS sent_1d,
                   count(*) FILTER (WHERE q.sent_at > now() - interval '7 days') AS sent_7d,
                   count(*) FILTER (WHERE q.bounced_at > now() - interval '7 days') AS bounces_7d,
                   count(*) FILTER (WHERE q.complained_at > now() - interval '7 days') AS complaints_7d
            FROM messages q WHERE q.tenant_id = t.id AND q.created_at > now() - interval '8 days'
        ) m ON true
        WHERE t.account_id IS NOT NULL
        GROUP BY t.account_id
    )
    SELECT u.id, u.email, u.suspended_at IS NOT NULL, p.workspaces,
           p.campaign_sent_1d::bigint, p.campaign_sent_7d::bigint, p.campaign_bounces_7d::bigint, p.campaign_complaints_7d::bigint,
           p.tx_sent_1d::bigint, p.tx_sent_7d::bigint, p.tx_bounces_7d::bigint, p.tx_complaints_7d::bigint
    FROM per_tenant p JOIN users u ON u.id = p.account_id
    ORDER BY p.campaign_sent_7d + p.tx_sent_7d DESC, u.email
    LIMIT p_limit
$function$;
-- Every account's address and volumes are the operator's to read, not the web process's: the
-- operator's CLI calls it as the database owner, which `migrate::grant_system_role` lets run
-- it once the function is the system role's (`migrate::OPERATOR_FUNCTIONS`).
REVOKE ALL ON FUNCTION account_activity(integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION account_activity(integer) FROM herald_app;

-- Image storage per account as well as per workspace: every workspace the account made.
CREATE OR REPLACE FUNCTION account_media_bytes(p_tenant uuid)
 RETURNS bigint
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    -- Only for the workspace of the caller's transaction: a definer function answers nothing
    -- about another workspace's account, whatever id it is given.
    SELECT coalesce(sum(m.bytes), 0)::bigint FROM media m
    WHERE p_tenant = app_tenant_id()
      AND m.tenant_id IN (SELECT t.id FROM tenants t
                          WHERE t.account_id = (SELECT x.account_id FROM tenants x WHERE x.id = p_tenant))
$function$;
REVOKE ALL ON FUNCTION account_media_bytes(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION account_media_bytes(uuid) TO herald_app;

-- Upload storage per account as well as per workspace: the CSV files not yet imported across
-- every workspace the account made (`import::append_chunk`).
CREATE OR REPLACE FUNCTION account_upload_bytes(p_tenant uuid)
 RETURNS bigint
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    -- Only for the workspace of the caller's transaction (see account_media_bytes).
    SELECT coalesce(sum(octet_length(c.data)), 0)::bigint FROM import_chunks c
    WHERE p_tenant = app_tenant_id()
      AND c.tenant_id IN (SELECT t.id FROM tenants t
                          WHERE t.account_id = (SELECT x.account_id FROM tenants x WHERE x.id = p_tenant))
$function$;
REVOKE ALL ON FUNCTION account_upload_bytes(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION account_upload_bytes(uuid) TO herald_app;
