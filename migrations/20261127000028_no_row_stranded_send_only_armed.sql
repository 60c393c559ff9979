-- Issue 30, §2, §4 and §5: no row stranded under a dead lease; the frequency cap loses no
-- reader; send only what is armed.

-- §4. `cap_moved`: this row's claim moved its reader's frequency-cap marks, and `cap_prev_*`
-- hold the marks from before the first such claim. A re-claim (a retry, a reaped row) keeps
-- them, so a row that ends unsent gives the reader back what it had, not this campaign's mark.
ALTER TABLE sends ADD COLUMN cap_moved boolean NOT NULL DEFAULT false;

-- §2. A claim that waited (reader rows locked by an import, a saturated pool) past its lease
-- could commit its rows under a token the reaper had just deleted: the reaper's UPDATE ran on a
-- snapshot taken before those rows were claimed, so they stayed `sending` for ever. The reaper
-- now also gives back `sending` rows whose token has no lease at all, whenever they were
-- committed. It skips a lease that a claim holds (FOR KEY SHARE, below) rather than wait for it:
-- a claim whose process is frozen mid-transaction must not stall the reaper for everyone.
CREATE OR REPLACE FUNCTION reap_expired_leases() RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH dead AS (
        DELETE FROM leases WHERE token IN (
            SELECT token FROM leases WHERE expires_at < now() FOR UPDATE SKIP LOCKED
        ) RETURNING token
    ), orphans AS (
        SELECT s.id, s.armed, s.cap_moved FROM sends s
        WHERE s.status = 'sending'
          AND (s.lease_token IN (SELECT token FROM dead)
               OR NOT EXISTS (SELECT 1 FROM leases l WHERE l.token = s.lease_token))
    ), sends_back AS (
        -- A row that never reached SMTP (not armed) gives its reader's cap marks back (§4);
        -- an armed one may have been delivered, so its reader stays this campaign's.
        UPDATE sends s SET status = 'queued', ambiguous = s.ambiguous + o.armed::int, armed = false,
                           cap_moved = o.cap_moved AND o.armed, updated_at = now()
        FROM orphans o WHERE s.id = o.id AND s.status = 'sending'
        RETURNING s.tenant_id, s.reader_id, s.campaign_id, s.cap_prev_at, s.cap_prev_campaign,
                  o.cap_moved AND NOT o.armed AS give_back
    ), caps_back AS (
        UPDATE readers r SET last_campaign_at = b.cap_prev_at, last_campaign_id = b.cap_prev_campaign
        FROM sends_back b
        WHERE b.give_back AND r.tenant_id = b.tenant_id AND r.id = b.reader_id AND r.last_campaign_id = b.campaign_id
        RETURNING 1
    ), messages_back AS (
        UPDATE messages m SET status = 'queued', ambiguous = m.ambiguous + m.armed::int, armed = false, updated_at = now()
        WHERE m.status = 'sending'
          AND (m.lease_token IN (SELECT token FROM dead)
               OR NOT EXISTS (SELECT 1 FROM leases l WHERE l.token = m.lease_token))
        RETURNING 1
    )
    -- (caps_back runs whether or not it is read: Postgres completes every data-modifying CTE.)
    SELECT (SELECT count(*) FROM sends_back) + (SELECT count(*) FROM messages_back)
$$;

-- The transactional claim holds its lease (KEY SHARE: the reaper cannot delete it, renewals
-- still can extend it) and checks it is live at the statement's own time, not the transaction's.
CREATE OR REPLACE FUNCTION claim_messages(p_token bigint, p_limit int, p_now timestamptz)
RETURNS TABLE (id uuid, tenant_id uuid, attempts int, skip text)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH lease AS (
        SELECT l.token FROM leases l WHERE l.token = p_token AND l.expires_at > clock_timestamp() FOR KEY SHARE
    ), picked AS (
        SELECT m.id FROM messages m
        WHERE m.status = 'queued' AND m.next_attempt_at <= p_now AND EXISTS (SELECT 1 FROM lease)
        ORDER BY m.next_attempt_at LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE messages m SET status = 'sending', lease_token = p_token, armed = false, attempts = m.attempts + 1,
                          updated_at = now()
    FROM picked WHERE m.id = picked.id
    RETURNING m.id, m.tenant_id, m.attempts,
        (SELECT 'suppressed (' || x.reason || ')' FROM suppressions x
         WHERE x.tenant_id = m.tenant_id AND x.email_lower = lower(m.to_email) AND x.reason <> 'unsubscribed_all' LIMIT 1)
$$;

-- §5. record_sent says which rows it armed, so a loop sends a message only once its arm is
-- confirmed: a row reaped (and perhaps claimed again) while the loop's clock said its lease was
-- still good is not armed, and not sent. Rows come back as (id, 'sent') or (id, 'armed').
DROP FUNCTION record_sent(uuid, bigint, bigint[], text[], text[], timestamptz[], bigint[]);
CREATE FUNCTION record_sent(p_tenant uuid, p_token bigint, p_ids bigint[], p_replies text[],
                            p_provider_ids text[], p_at timestamptz[], p_arm bigint[])
RETURNS TABLE (id bigint, outcome text)
LANGUAGE plpgsql VOLATILE SET search_path = public, pg_temp AS $$
#variable_conflict use_column
BEGIN
    PERFORM set_config('app.tenant_id', p_tenant::text, true);
    IF cardinality(p_arm) > 0 THEN
        RETURN QUERY
        UPDATE sends s SET armed = true
        FROM unnest(p_arm) AS x(id)
        WHERE s.tenant_id = p_tenant AND s.id = x.id AND s.lease_token IS NOT DISTINCT FROM p_token
          AND s.status = 'sending' AND NOT s.armed
        RETURNING s.id, 'armed'::text;
    END IF;
    RETURN QUERY
    UPDATE sends s SET status = 'sent', sent_at = x.at, smtp_reply = x.reply, provider_id = x.provider_id,
                       reason = NULL, armed = false,
                       ambiguous = s.ambiguous - (s.status = 'queued' AND s.ambiguous > 0)::int,
                       updated_at = now()
    FROM unnest(p_ids, p_replies, p_provider_ids, p_at) AS x(id, reply, provider_id, at)
    WHERE s.tenant_id = p_tenant AND s.id = x.id AND s.lease_token = p_token AND s.status IN ('sending', 'queued')
    RETURNING s.id, 'sent'::text;
END $$;
