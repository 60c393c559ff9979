-- The delivery engine's claims, leases, reapers and the record of what was sent
-- (engine/src/campaigns/, engine/src/transactional/, engine/src/jobs.rs), and the due
-- scheduled, recurring and A/B sends.
--
-- The one current text of these functions and triggers: `herald migrate` applies this file
-- after the schema migrations when it has changed. Edit here, never in a migration (a
-- changed signature needs its DROP FUNCTION in a migration first). See docs/database.md.

-- Queued transactional mail of a suspended workspace, or one whose transactional stream the guard
-- paused, waits (its rows are not offered).
CREATE OR REPLACE FUNCTION claim_messages(p_token bigint, p_limit integer, p_now timestamp with time zone)
 RETURNS TABLE(id uuid, tenant_id uuid, attempts integer, skip text)
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION claim_messages(bigint,integer,timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION claim_messages(bigint,integer,timestamp with time zone) TO herald_app;

-- NULL when the mail may go (and it is counted), else which limit refused it:
-- 'recipient' or 'workspace:<limit>'.
CREATE OR REPLACE FUNCTION claim_system_mail(p_tenant uuid, p_recipient text, p_per_workspace integer, p_per_recipient integer, p_per_account integer)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
DECLARE
    workspace_limit int := coalesce((SELECT system_mail_per_day FROM tenants WHERE id = p_tenant), p_per_workspace);
    account uuid := (SELECT account_id FROM tenants WHERE id = p_tenant);
    account_limit int := coalesce((SELECT system_mail_per_day FROM users WHERE id = account), p_per_account);
BEGIN
    -- One claim at a time per recipient, per workspace and per account: two requests cannot
    -- both take the last slot.
    PERFORM pg_advisory_xact_lock(hashtextextended('system_mail:' || p_recipient, 0));
    PERFORM pg_advisory_xact_lock(hashtextextended('system_mail:' || p_tenant::text, 0));
    IF account IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('system_mail_account:' || account::text, 0));
    END IF;
    IF (SELECT count(*) FROM system_mail_log
        WHERE recipient = p_recipient AND sent_at > now() - interval '1 day') >= p_per_recipient THEN
        RETURN 'recipient';
    END IF;
    IF (SELECT count(*) FROM system_mail_log
        WHERE tenant_id = p_tenant AND sent_at > now() - interval '1 day') >= workspace_limit THEN
        RETURN 'workspace:' || workspace_limit;
    END IF;
    IF account IS NOT NULL AND (SELECT count(*) FROM system_mail_log
        WHERE tenant_id IN (SELECT id FROM tenants WHERE account_id = account)
          AND sent_at > now() - interval '1 day') >= account_limit THEN
        RETURN 'account:' || account_limit;
    END IF;
    INSERT INTO system_mail_log (tenant_id, recipient) VALUES (p_tenant, p_recipient);
    -- Now and then, forget what no longer counts.
    IF random() < 0.01 THEN
        DELETE FROM system_mail_log WHERE sent_at < now() - interval '1 day';
    END IF;
    RETURN NULL;
END $function$;
REVOKE ALL ON FUNCTION claim_system_mail(uuid,text,integer,integer,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION claim_system_mail(uuid,text,integer,integer,integer) TO herald_app;

CREATE OR REPLACE FUNCTION claim_unattended_campaigns(every interval)
 RETURNS TABLE(tenant_id uuid, campaign_id uuid, fanout_done boolean)
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    UPDATE campaigns c SET heartbeat_at = now()
    WHERE c.status = 'sending' AND (c.heartbeat_at IS NULL OR c.heartbeat_at < now() - every)
      AND ((NOT EXISTS (SELECT 1 FROM leases l WHERE l.campaign_id = c.id AND l.slot >= 0 AND l.expires_at > now())
            AND (NOT c.fanout_done
                 OR EXISTS (SELECT 1 FROM sends s WHERE s.campaign_id = c.id AND s.status = 'queued' AND s.next_attempt_at <= now())
                 OR (c.automation_id IS NULL
                     AND NOT EXISTS (SELECT 1 FROM sends s WHERE s.campaign_id = c.id AND s.status IN ('queued', 'held')))))
           OR (NOT c.fanout_done
               AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.campaign_id = c.id AND l.slot = -1 AND l.expires_at > now())))
    RETURNING c.tenant_id, c.id, c.fanout_done
$function$;
REVOKE ALL ON FUNCTION claim_unattended_campaigns(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION claim_unattended_campaigns(interval) TO herald_app;

-- The A/B tests whose window has ended without a winner, in every workspace: the supervisor
-- picks each one's winner in that workspace's own transaction (a sent one had nobody held: a
-- test of the whole audience, whose winner is only recorded).
CREATE OR REPLACE FUNCTION due_ab_tests()
 RETURNS TABLE(tenant_id uuid, campaign_id uuid)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    SELECT c.tenant_id, c.id FROM campaigns c
    WHERE c.ab_winner IS NULL AND c.ab_decide_at IS NOT NULL AND c.ab_decide_at <= now()
      AND c.status IN ('sending', 'paused', 'sent')
$function$;
REVOKE ALL ON FUNCTION due_ab_tests() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION due_ab_tests() TO herald_app;

-- Recurring campaigns with a slot due since their last edition: one row each, for the newest due
-- slot only (a server that was down over several slots sends one edition, not one per slot).
CREATE OR REPLACE FUNCTION due_editions(p_now timestamp with time zone)
 RETURNS TABLE(tenant_id uuid, campaign_id uuid, slot timestamp with time zone)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    SELECT c.tenant_id, c.id, s.slot
    FROM campaigns c CROSS JOIN LATERAL (SELECT recurrence_latest_slot(c.recurrence, p_now) AS slot) s
    WHERE c.status = 'recurring' AND s.slot IS NOT NULL
      AND (c.last_edition_slot IS NULL OR s.slot > c.last_edition_slot)
$function$;
REVOKE ALL ON FUNCTION due_editions(timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION due_editions(timestamp with time zone) TO herald_app;

-- §2. A claim that waited (reader rows locked by an import, a saturated pool) past its lease
-- could commit its rows under a token the reaper had just deleted: the reaper's UPDATE ran on a
-- snapshot taken before those rows were claimed, so they stayed `sending` for ever. The reaper
-- now also gives back `sending` rows whose token has no lease at all, whenever they were
-- committed. It skips a lease that a claim holds (FOR KEY SHARE, below) rather than wait for it:
-- a claim whose process is frozen mid-transaction must not stall the reaper for everyone.
CREATE OR REPLACE FUNCTION reap_expired_leases()
 RETURNS bigint
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
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
        -- A row that never reached SMTP was not attempted: its claim is not counted, and its
        -- queue age starts again at its next claim, as when a loop gives a batch back.
        UPDATE sends s SET status = 'queued', ambiguous = s.ambiguous + o.armed::int, armed = false,
                           cap_moved = o.cap_moved AND o.armed,
                           attempts = CASE WHEN o.armed THEN s.attempts ELSE greatest(s.attempts - 1, 0) END,
                           first_claimed_at = CASE WHEN NOT o.armed AND s.attempts <= 1 THEN NULL
                                                   ELSE s.first_claimed_at END,
                           updated_at = now()
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
$function$;
REVOKE ALL ON FUNCTION reap_expired_leases() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION reap_expired_leases() TO herald_app;

CREATE OR REPLACE FUNCTION record_sent(p_tenant uuid, p_token bigint, p_ids bigint[], p_replies text[], p_provider_ids text[], p_at timestamp with time zone[], p_arm bigint[])
 RETURNS TABLE(id bigint, outcome text)
 LANGUAGE plpgsql
 SET search_path TO 'public', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    announce boolean;
BEGIN
    PERFORM set_config('app.tenant_id', p_tenant::text, true);
    -- Whether the workspace's webhook endpoints receive `message.sent` (asked once per batch,
    -- after the tenant is set: the endpoints are under row-level security).
    announce := webhook_wanted(p_tenant, 'message.sent');
    IF cardinality(p_arm) > 0 THEN
        RETURN QUERY
        UPDATE sends s SET armed = true
        FROM unnest(p_arm) AS x(id)
        WHERE s.tenant_id = p_tenant AND s.id = x.id AND s.lease_token IS NOT DISTINCT FROM p_token
          AND s.status = 'sending' AND NOT s.armed
        RETURNING s.id, 'armed'::text;
    END IF;
    RETURN QUERY
    WITH sent AS (
        UPDATE sends s SET status = 'sent', sent_at = x.at, smtp_reply = x.reply, provider_id = x.provider_id,
                           reason = NULL, armed = false,
                           ambiguous = s.ambiguous - (s.status = 'queued' AND s.ambiguous > 0)::int,
                           updated_at = now()
        FROM unnest(p_ids, p_replies, p_provider_ids, p_at) AS x(id, reply, provider_id, at)
        WHERE s.tenant_id = p_tenant AND s.id = x.id AND s.lease_token = p_token AND s.status IN ('sending', 'queued')
        RETURNING s.id, s.campaign_id, s.reader_id, s.email, s.sent_at
    ), announced AS (
        -- In the same transaction as the sends it reports (see engine/sql/webhooks.sql).
        INSERT INTO outbound_events (tenant_id, type, data, reader_id, occurred_at)
        SELECT p_tenant, 'message.sent',
               jsonb_build_object('message', jsonb_build_object('channel', 'campaign', 'campaign_id', t.campaign_id,
                                                                'to', t.email),
                                  'reader', jsonb_build_object('id', t.reader_id)),
               t.reader_id, t.sent_at
          FROM sent t WHERE announce
    )
    SELECT t.id, 'sent'::text FROM sent t;
END $function$;

-- The newest slot of `rec` at or before `p_now`, in the schedule's time zone (Postgres's tz
-- database, so daylight-saving changes move the UTC instant, not the local time). NULL when the
-- schedule has no slot in the last 62 days.
CREATE OR REPLACE FUNCTION recurrence_latest_slot(rec jsonb, p_now timestamp with time zone)
 RETURNS timestamp with time zone
 LANGUAGE sql
 STABLE
 SET search_path TO 'public', 'pg_temp'
AS $function$
    SELECT max(slot) FROM (
        SELECT (d::date + (rec->>'time')::time) AT TIME ZONE (rec->>'tz') AS slot, d
        FROM generate_series(((p_now AT TIME ZONE (rec->>'tz'))::date - 62)::timestamp,
                             (p_now AT TIME ZONE (rec->>'tz'))::date::timestamp, interval '1 day') AS d
    ) s
    WHERE slot <= p_now
      AND CASE rec->>'every'
              WHEN 'day' THEN true
              WHEN 'week' THEN extract(isodow FROM d)::int IN (SELECT jsonb_array_elements_text(rec->'weekdays')::int)
              WHEN 'month' THEN extract(day FROM d)::int = (rec->>'month_day')::int
              ELSE false
          END
$function$;

-- Renews the caller's leases and says, for each one still held, the status of its campaign
-- (a loop stops within a tick of a pause or cancel). A token missing from the answer is lost.
CREATE OR REPLACE FUNCTION renew_leases(p_tokens bigint[], p_secs double precision)
 RETURNS TABLE(token bigint, campaign_status text)
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    UPDATE leases l SET expires_at = now() + make_interval(secs => p_secs)
    WHERE l.token = ANY(p_tokens) AND l.expires_at > now()
    RETURNING l.token, (SELECT c.status FROM campaigns c WHERE c.id = l.campaign_id)
$function$;
REVOKE ALL ON FUNCTION renew_leases(bigint[],double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION renew_leases(bigint[],double precision) TO herald_app;

-- How far a send-log row got, best first: of two rows for one reader and campaign the merge
-- keeps the one that went furthest, so a sent copy is never followed by a second.
CREATE OR REPLACE FUNCTION send_progress_rank(status text)
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE
AS $function$ SELECT CASE status WHEN 'sent' THEN 0 WHEN 'sending' THEN 1 WHEN 'failed' THEN 2 WHEN 'expired' THEN 3
                             WHEN 'skipped' THEN 4 WHEN 'cancelled' THEN 5 ELSE 6 END $function$;

-- A row of a cancelled campaign never goes back to the queue, whoever gives it back (a loop
-- releasing its batch, a retry, the reaper, "retry failed"): it ends `cancelled`. The campaign
-- row is read FOR SHARE, so a give-back racing a cancel waits for the cancel to commit and
-- sees it (cancel locks the campaign first, then cancels the queued rows).
CREATE OR REPLACE FUNCTION sends_never_queued_in_cancelled()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
BEGIN
    IF (SELECT c.status FROM campaigns c WHERE c.id = NEW.campaign_id FOR SHARE) = 'cancelled' THEN
        NEW.status := 'cancelled';
        NEW.armed := false;
    END IF;
    RETURN NEW;
END $function$;

-- Scheduled campaigns of a suspended workspace stay scheduled until the suspension is lifted.
CREATE OR REPLACE FUNCTION start_due_campaigns()
 RETURNS TABLE(tenant_id uuid, campaign_id uuid)
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    UPDATE campaigns c SET status = 'sending', started_at = coalesce(c.started_at, now()), updated_at = now(),
                           heartbeat_at = now()
    WHERE c.status = 'scheduled' AND c.scheduled_at <= now()
      AND NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = c.tenant_id AND t.suspended_at IS NOT NULL)
    RETURNING c.tenant_id, c.id
$function$;
REVOKE ALL ON FUNCTION start_due_campaigns() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION start_due_campaigns() TO herald_app;

-- Used by that merge when two copies of a mailbox disagree. A complaint or hard bounce protects
-- the sender's reputation and a manual entry is the author's decision; an unsubscribe from
-- everything is the weakest reason (it does not stop transactional mail).
CREATE OR REPLACE FUNCTION suppression_strength(reason text)
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE
AS $function$ SELECT CASE reason WHEN 'complaint' THEN 4 WHEN 'hard_bounce' THEN 3 WHEN 'manual' THEN 2 ELSE 1 END $function$;

-- Triggers

CREATE OR REPLACE TRIGGER sends_never_queued_in_cancelled BEFORE UPDATE OF status ON sends FOR EACH ROW WHEN (((new.status = 'queued'::text) AND (old.status <> 'queued'::text))) EXECUTE FUNCTION sends_never_queued_in_cancelled();
