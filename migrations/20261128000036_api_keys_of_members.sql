-- Issue 31 §5: API keys acted as admin, were tied to no one and survived their maker's removal
-- or demotion. A key now carries a role no higher than admin (narrower keys for narrower jobs),
-- dies with its maker's account, and answers 403 while its maker is not an admin or owner of
-- the workspace (or the maker's account is suspended, §2). Keys made by an operator with
-- `herald admin create-api-key` have no maker and stand on their own.
ALTER TABLE api_keys ADD COLUMN role text NOT NULL DEFAULT 'admin' CHECK (role IN ('admin', 'author', 'viewer'));
ALTER TABLE api_keys DROP CONSTRAINT api_keys_created_by_fkey;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_created_by_fkey FOREIGN KEY (created_by)
    REFERENCES users (id) ON DELETE CASCADE;

-- §2: an operator suspends an account (`herald admin suspend-account`): its keys answer 403,
-- and its workspaces send nothing (their campaigns are paused and their queued transactional
-- mail waits) until it is lifted.
ALTER TABLE users ADD COLUMN suspended_at timestamptz, ADD COLUMN suspended_reason text;
ALTER TABLE tenants ADD COLUMN suspended_at timestamptz;
-- §2: the bounce and complaint guard campaigns have, for the transactional stream: a workspace
-- whose transactional mail bounces or is reported as spam too often stops sending it, with a
-- reason its admins see and clear (`transactional::guard`).
ALTER TABLE tenants ADD COLUMN transactional_paused_reason text;

DROP FUNCTION authenticate_api_key(text);
-- `standing`: 'ok', or why the key may not act now ('maker_not_admin', 'suspended').
CREATE FUNCTION authenticate_api_key(p_key_hash text)
    RETURNS TABLE (key_id uuid, tenant_id uuid, role text, standing text)
    LANGUAGE sql SECURITY DEFINER SET search_path = public
    AS $$
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
    $$;
REVOKE ALL ON FUNCTION authenticate_api_key(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION authenticate_api_key(text) TO herald_app;

-- The operator's own actions (a suspension) go into the workspace's audit log with neither a
-- member nor a key as the actor.
ALTER TABLE audit_log DROP CONSTRAINT audit_log_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_one_actor CHECK (actor_user_id IS NULL OR actor_key_id IS NULL);

-- Scheduled campaigns of a suspended workspace stay scheduled until the suspension is lifted.
CREATE OR REPLACE FUNCTION start_due_campaigns() RETURNS TABLE (tenant_id uuid, campaign_id uuid)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    UPDATE campaigns c SET status = 'sending', started_at = coalesce(c.started_at, now()), updated_at = now(),
                           heartbeat_at = now()
    WHERE c.status = 'scheduled' AND c.scheduled_at <= now()
      AND NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = c.tenant_id AND t.suspended_at IS NOT NULL)
    RETURNING c.tenant_id, c.id
$$;

-- Queued transactional mail of a suspended workspace, or one whose transactional stream the guard
-- paused, waits (its rows are not offered).
CREATE OR REPLACE FUNCTION claim_messages(p_token bigint, p_limit int, p_now timestamptz)
RETURNS TABLE (id uuid, tenant_id uuid, attempts int, skip text)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH RECURSIVE lease AS (
        SELECT l.token FROM leases l WHERE l.token = p_token AND l.expires_at > clock_timestamp() FOR KEY SHARE
    ), queued_in AS (
        (SELECT q.tenant_id FROM messages q WHERE q.status = 'queued' ORDER BY q.tenant_id LIMIT 1)
        UNION ALL
        SELECT (SELECT q.tenant_id FROM messages q WHERE q.status = 'queued' AND q.tenant_id > w.tenant_id
                ORDER BY q.tenant_id LIMIT 1)
        FROM queued_in w WHERE w.tenant_id IS NOT NULL
    ), share AS (
        SELECT least(p_limit, greatest(1, ceil(p_limit::numeric * 4 / greatest(count(*), 1))))::int AS n
        FROM queued_in WHERE tenant_id IS NOT NULL
    ), offered AS (
        SELECT o.id, o.turn, o.next_attempt_at FROM queued_in w
        CROSS JOIN LATERAL (
            SELECT q.id, q.next_attempt_at, row_number() OVER (ORDER BY q.next_attempt_at) AS turn
            FROM messages q WHERE q.tenant_id = w.tenant_id AND q.status = 'queued' AND q.next_attempt_at <= p_now
            ORDER BY q.next_attempt_at LIMIT (SELECT n FROM share)
        ) o
        WHERE w.tenant_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = w.tenant_id
                          AND (t.suspended_at IS NOT NULL OR t.transactional_paused_reason IS NOT NULL))
        ORDER BY o.turn, o.next_attempt_at LIMIT p_limit * 2
    ), picked AS (
        SELECT m.id FROM messages m JOIN offered o ON o.id = m.id
        WHERE m.status = 'queued' AND m.next_attempt_at <= p_now AND EXISTS (SELECT 1 FROM lease)
        ORDER BY o.turn, o.next_attempt_at LIMIT p_limit
        FOR UPDATE OF m SKIP LOCKED
    )
    UPDATE messages m SET status = 'sending', lease_token = p_token, armed = false, attempts = m.attempts + 1,
                          updated_at = now()
    FROM picked WHERE m.id = picked.id
    RETURNING m.id, m.tenant_id, m.attempts,
        (SELECT 'suppressed (' || x.reason || ')' FROM suppressions x
         WHERE x.tenant_id = m.tenant_id AND x.email_lower = lower(m.to_email) AND x.reason <> 'unsubscribed_all' LIMIT 1)
$$;
