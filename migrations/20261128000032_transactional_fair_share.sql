-- Issue 30 §7: workspaces get a fair share of the transactional stream. The claim took the
-- oldest due messages first across every workspace, so one workspace that queued 100,000
-- messages held up every other workspace's password resets until its backlog was through.
-- Now each workspace with due messages offers its oldest few (a share of the batch), and the
-- batch takes them round-robin: every workspace's oldest first, then every second-oldest, …
-- Workspaces are found by a skip scan of `messages_tenant_due_idx` (one index probe per
-- workspace with queued mail), and only the chosen rows are locked.
CREATE INDEX messages_tenant_due_idx ON messages (tenant_id, next_attempt_at) WHERE status = 'queued';

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
        -- Each workspace offers up to four times its even share (so a batch still fills when
        -- some have fewer), never more than a batch: at 1,000 busy workspaces one row each.
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
