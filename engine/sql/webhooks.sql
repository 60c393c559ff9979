-- Outbound webhooks: events written in the transaction of the change that caused them, by
-- triggers on the tables every path writes (so an import, a public form, the API and a
-- campaign's fan-out all emit without knowing it), one delivery per subscribed endpoint, and the
-- workers' claim. Called from engine/src/outbound_webhooks/.
--
-- Nothing is written for a workspace with no enabled endpoint subscribed to an event's type:
-- every emitting trigger filters its rows with `webhook_wanted` first, so bulk work in such a
-- workspace pays one index probe per statement's workspace and type, not a row per change.
--
-- The one current text of these functions and triggers: `herald migrate` applies this file
-- after the schema migrations when it has changed. Edit here, never in a migration (a
-- changed signature needs its DROP FUNCTION in a migration first). See docs/database.md.

-- Whether an enabled endpoint of the workspace receives `p_type`.
CREATE OR REPLACE FUNCTION webhook_wanted(p_tenant uuid, p_type text)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
    SELECT EXISTS (SELECT 1 FROM webhook_endpoints e
                    WHERE e.tenant_id = p_tenant AND e.enabled AND p_type = ANY (e.event_types))
$function$;

-- Whether any endpoint the caller can see receives one of `p_types`: the cheap first question
-- each emitting trigger asks, so a statement in a database (or, under row-level security, a
-- workspace) without such endpoints does nothing more.
CREATE OR REPLACE FUNCTION webhook_any_wanted(p_types text[])
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
    SELECT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.enabled AND e.event_types && p_types)
$function$;

-- Each new event gets a delivery to every enabled endpoint subscribed to its type (the test
-- event names its one endpoint in `data`, and goes to that endpoint alone).
CREATE OR REPLACE FUNCTION outbound_events_fan_out()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    INSERT INTO outbound_deliveries (tenant_id, endpoint_id, event_id)
    SELECT n.tenant_id, e.id, n.id
      FROM new_events n
      JOIN webhook_endpoints e ON e.tenant_id = n.tenant_id
     WHERE CASE WHEN n.type = 'webhook.test' THEN e.id = (n.data ->> 'endpoint_id')::uuid
                ELSE e.enabled AND n.type = ANY (e.event_types) END;
    RETURN NULL;
END $function$;

-- A reader as the events show them.
CREATE OR REPLACE FUNCTION webhook_reader_json(r readers)
 RETURNS jsonb
 LANGUAGE sql
 IMMUTABLE
AS $function$
    SELECT jsonb_build_object('id', r.id, 'email', r.email, 'name', r.name, 'status', r.status,
                              'attributes', r.attributes)
$function$;

-- New subscriptions: `reader.subscribed`, and `reader.confirmed` for those confirmed at once.
CREATE OR REPLACE FUNCTION webhooks_on_new_subscriptions()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NOT webhook_any_wanted(ARRAY['reader.subscribed', 'reader.confirmed']) THEN
        RETURN NULL;
    END IF;
    WITH wanted AS (
        SELECT w.tenant_id, t.type
          FROM (SELECT DISTINCT tenant_id FROM new_subscriptions) w
          CROSS JOIN (VALUES ('reader.subscribed'), ('reader.confirmed')) AS t(type)
         WHERE webhook_wanted(w.tenant_id, t.type)
    )
    INSERT INTO outbound_events (tenant_id, type, data, reader_id)
    SELECT n.tenant_id, w.type,
           jsonb_build_object('reader', webhook_reader_json(r), 'list', jsonb_build_object('id', l.id, 'name', l.name),
                              'subscription_status', n.status),
           n.reader_id
      FROM new_subscriptions n
      JOIN wanted w ON w.tenant_id = n.tenant_id
      JOIN readers r ON r.id = n.reader_id
      JOIN lists l ON l.id = n.list_id
     WHERE w.type = 'reader.subscribed' OR n.status = 'confirmed';
    RETURN NULL;
END $function$;

-- A subscription's status changed: left (`reader.unsubscribed`), confirmed
-- (`reader.confirmed`), or back after leaving (`reader.subscribed`).
CREATE OR REPLACE FUNCTION webhooks_on_subscription_changes()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NOT webhook_any_wanted(ARRAY['reader.subscribed', 'reader.confirmed', 'reader.unsubscribed']) THEN
        RETURN NULL;
    END IF;
    INSERT INTO outbound_events (tenant_id, type, data, reader_id)
    SELECT c.tenant_id, c.type,
           jsonb_build_object('reader', webhook_reader_json(r), 'list', jsonb_build_object('id', l.id, 'name', l.name),
                              'subscription_status', c.status),
           c.reader_id
      FROM (SELECT n.tenant_id, n.list_id, n.reader_id, n.status, t.type
              FROM new_subscriptions n
              JOIN old_subscriptions o ON o.list_id = n.list_id AND o.reader_id = n.reader_id
              CROSS JOIN LATERAL (VALUES
                  (CASE WHEN n.status = 'unsubscribed' AND o.status <> 'unsubscribed' THEN 'reader.unsubscribed' END),
                  (CASE WHEN n.status = 'confirmed' AND o.status <> 'confirmed' THEN 'reader.confirmed' END),
                  (CASE WHEN o.status = 'unsubscribed' AND n.status <> 'unsubscribed' THEN 'reader.subscribed' END)
              ) AS t(type)
             WHERE t.type IS NOT NULL) c
      JOIN readers r ON r.id = c.reader_id
      JOIN lists l ON l.id = c.list_id
     WHERE webhook_wanted(c.tenant_id, c.type);
    RETURN NULL;
END $function$;

-- A reader's address, name, fields or status changed.
CREATE OR REPLACE FUNCTION webhooks_on_reader_changes()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NOT webhook_any_wanted(ARRAY['reader.updated']) THEN
        RETURN NULL;
    END IF;
    WITH wanted AS (
        SELECT w.tenant_id FROM (SELECT DISTINCT tenant_id FROM new_readers) w
         WHERE webhook_wanted(w.tenant_id, 'reader.updated')
    )
    INSERT INTO outbound_events (tenant_id, type, data, reader_id)
    SELECT n.tenant_id, 'reader.updated', jsonb_build_object('reader', webhook_reader_json(n)), n.id
      FROM new_readers n
      JOIN wanted w ON w.tenant_id = n.tenant_id
      JOIN old_readers o ON o.id = n.id
     WHERE (n.email, n.name, n.attributes, n.status) IS DISTINCT FROM (o.email, o.name, o.attributes, o.status);
    RETURN NULL;
END $function$;

-- A reader erased (or merged into another): what Herald kept for webhooks about them goes
-- (events not yet delivered, and the bodies of those that were), and `reader.deleted` carries
-- ids only.
CREATE OR REPLACE FUNCTION webhooks_on_reader_deletes()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- Events stay after their endpoint goes (until pruned), so this looks whatever the endpoints.
    DELETE FROM outbound_events e USING old_readers o WHERE e.tenant_id = o.tenant_id AND e.reader_id = o.id;
    IF NOT webhook_any_wanted(ARRAY['reader.deleted']) THEN
        RETURN NULL;
    END IF;
    WITH wanted AS (
        SELECT w.tenant_id FROM (SELECT DISTINCT tenant_id FROM old_readers) w
         WHERE webhook_wanted(w.tenant_id, 'reader.deleted')
    )
    INSERT INTO outbound_events (tenant_id, type, data)
    SELECT o.tenant_id, 'reader.deleted', jsonb_build_object('reader', jsonb_build_object('id', o.id))
      FROM old_readers o
      JOIN wanted w ON w.tenant_id = o.tenant_id;
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION webhooks_on_new_tags()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NOT webhook_any_wanted(ARRAY['reader.tagged']) THEN
        RETURN NULL;
    END IF;
    WITH wanted AS (
        SELECT w.tenant_id FROM (SELECT DISTINCT tenant_id FROM new_tags) w
         WHERE webhook_wanted(w.tenant_id, 'reader.tagged')
    )
    INSERT INTO outbound_events (tenant_id, type, data, reader_id)
    SELECT n.tenant_id, 'reader.tagged',
           jsonb_build_object('reader', webhook_reader_json(r), 'tag', jsonb_build_object('id', t.id, 'name', t.name)),
           n.reader_id
      FROM new_tags n
      JOIN wanted w ON w.tenant_id = n.tenant_id
      JOIN readers r ON r.tenant_id = n.tenant_id AND r.id = n.reader_id
      JOIN tags t ON t.tenant_id = n.tenant_id AND t.id = n.tag_id;
    RETURN NULL;
END $function$;

-- A tag taken off a reader who is still there (erasing a reader, or deleting the tag itself,
-- takes tags off too: the reader's erasure says so with `reader.deleted`; a deleted tag with
-- one `reader.untagged` per reader, as it did happen to each).
CREATE OR REPLACE FUNCTION webhooks_on_removed_tags()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NOT webhook_any_wanted(ARRAY['reader.untagged']) THEN
        RETURN NULL;
    END IF;
    WITH wanted AS (
        SELECT w.tenant_id FROM (SELECT DISTINCT tenant_id FROM old_tags) w
         WHERE webhook_wanted(w.tenant_id, 'reader.untagged')
    )
    INSERT INTO outbound_events (tenant_id, type, data, reader_id)
    SELECT o.tenant_id, 'reader.untagged',
           jsonb_build_object('reader', webhook_reader_json(r), 'tag', jsonb_build_object('id', o.tag_id)),
           o.reader_id
      FROM old_tags o
      JOIN wanted w ON w.tenant_id = o.tenant_id
      JOIN readers r ON r.tenant_id = o.tenant_id AND r.id = o.reader_id;
    RETURN NULL;
END $function$;

-- A campaign began sending, was paused, or finished (sent or cancelled).
CREATE OR REPLACE FUNCTION webhooks_on_campaign_status()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    kind text := CASE
        WHEN NEW.status = 'sending' AND OLD.status <> 'paused' THEN 'campaign.started'
        WHEN NEW.status = 'paused' THEN 'campaign.paused'
        WHEN NEW.status IN ('sent', 'cancelled') THEN 'campaign.finished'
    END;
BEGIN
    IF kind IS NOT NULL AND webhook_wanted(NEW.tenant_id, kind) THEN
        INSERT INTO outbound_events (tenant_id, type, data)
        VALUES (NEW.tenant_id, kind, jsonb_build_object('campaign', jsonb_build_object(
            'id', NEW.id, 'name', NEW.name, 'subject', NEW.subject, 'status', NEW.status)));
    END IF;
    RETURN NULL;
END $function$;

-- Campaign mail's events (opens, clicks, deliveries, bounces, complaints), from the tracking
-- firehose and the providers' reports: `message.*` with the campaign and reader they concern.
CREATE OR REPLACE FUNCTION webhooks_on_campaign_mail_events()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NOT webhook_any_wanted(ARRAY['message.opened', 'message.clicked', 'message.delivered', 'message.bounced',
                                    'message.complained']) THEN
        RETURN NULL;
    END IF;
    WITH typed AS (
        SELECT n.*, CASE n.kind WHEN 'open' THEN 'message.opened' WHEN 'click' THEN 'message.clicked'
                                WHEN 'delivered' THEN 'message.delivered' WHEN 'bounce_hard' THEN 'message.bounced'
                                WHEN 'bounce_soft' THEN 'message.bounced' WHEN 'complaint' THEN 'message.complained' END AS type
          FROM new_events n
    ), wanted AS (
        SELECT w.tenant_id, w.type FROM (SELECT DISTINCT tenant_id, type FROM typed WHERE type IS NOT NULL) w
         WHERE webhook_wanted(w.tenant_id, w.type)
    )
    INSERT INTO outbound_events (tenant_id, type, data, reader_id, occurred_at)
    SELECT t.tenant_id, t.type,
           jsonb_strip_nulls(jsonb_build_object(
               'message', jsonb_build_object('channel', 'campaign', 'campaign_id', t.campaign_id),
               'reader', CASE WHEN t.reader_id IS NOT NULL THEN jsonb_build_object('id', t.reader_id) END,
               'url', CASE WHEN t.kind = 'click' THEN (SELECT l.url FROM campaign_links l WHERE l.id = t.link_id) END,
               'privacy_prefetch', CASE WHEN t.kind = 'open' THEN t.prefetch END,
               'hard', CASE WHEN t.kind LIKE 'bounce%' THEN t.kind = 'bounce_hard' END,
               'detail', t.detail)),
           t.reader_id, t.at
      FROM typed t
      JOIN wanted w ON w.tenant_id = t.tenant_id AND w.type = t.type;
    RETURN NULL;
END $function$;

-- Transactional messages' events, from their own log: `message.*` with the message's id and
-- recipient.
CREATE OR REPLACE FUNCTION webhooks_on_transactional_events()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NOT webhook_any_wanted(ARRAY['message.sent', 'message.opened', 'message.clicked', 'message.delivered',
                                    'message.bounced', 'message.complained']) THEN
        RETURN NULL;
    END IF;
    WITH typed AS (
        SELECT n.*, CASE n.kind WHEN 'sent' THEN 'message.sent' WHEN 'opened' THEN 'message.opened'
                                WHEN 'clicked' THEN 'message.clicked' WHEN 'delivered' THEN 'message.delivered'
                                WHEN 'bounced' THEN 'message.bounced' WHEN 'soft_bounced' THEN 'message.bounced'
                                WHEN 'complained' THEN 'message.complained' END AS type
          FROM new_message_events n
    ), wanted AS (
        SELECT w.tenant_id, w.type FROM (SELECT DISTINCT tenant_id, type FROM typed WHERE type IS NOT NULL) w
         WHERE webhook_wanted(w.tenant_id, w.type)
    )
    INSERT INTO outbound_events (tenant_id, type, data, occurred_at)
    SELECT t.tenant_id, t.type,
           jsonb_strip_nulls(jsonb_build_object(
               'message', jsonb_build_object('channel', 'transactional', 'id', t.message_id, 'to', m.to_email),
               'url', CASE WHEN t.kind = 'clicked' THEN t.detail END,
               'privacy_prefetch', CASE WHEN t.kind = 'opened' THEN t.detail = 'privacy prefetch' END,
               'hard', CASE WHEN t.kind IN ('bounced', 'soft_bounced') THEN t.kind = 'bounced' END,
               'detail', CASE WHEN t.kind NOT IN ('clicked', 'opened') THEN nullif(t.detail, '') END)),
           t.occurred_at
      FROM typed t
      JOIN wanted w ON w.tenant_id = t.tenant_id AND w.type = t.type
      JOIN messages m ON m.tenant_id = t.tenant_id AND m.id = t.message_id;
    RETURN NULL;
END $function$;

-- Automations: a reader entered one, one of its email steps queued their mail, or their run
-- ended (`state` finished or exited, with the reason).
CREATE OR REPLACE FUNCTION webhooks_on_automation_entries()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NOT webhook_any_wanted(ARRAY['automation.entered']) THEN
        RETURN NULL;
    END IF;
    WITH wanted AS (
        SELECT w.tenant_id FROM (SELECT DISTINCT tenant_id FROM new_runs) w
         WHERE webhook_wanted(w.tenant_id, 'automation.entered')
    )
    INSERT INTO outbound_events (tenant_id, type, data, reader_id, occurred_at)
    SELECT n.tenant_id, 'automation.entered',
           jsonb_build_object('automation', jsonb_build_object('id', n.automation_id), 'run', jsonb_build_object('id', n.id, 'entry', n.entry),
                              'reader', jsonb_build_object('id', n.reader_id)),
           n.reader_id, n.entered_at
      FROM new_runs n
      JOIN wanted w ON w.tenant_id = n.tenant_id;
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION webhooks_on_automation_steps()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NOT webhook_any_wanted(ARRAY['automation.step_sent']) THEN
        RETURN NULL;
    END IF;
    WITH wanted AS (
        SELECT w.tenant_id FROM (SELECT DISTINCT tenant_id FROM new_steps) w
         WHERE webhook_wanted(w.tenant_id, 'automation.step_sent')
    )
    INSERT INTO outbound_events (tenant_id, type, data, reader_id, occurred_at)
    SELECT n.tenant_id, 'automation.step_sent',
           jsonb_build_object('automation', jsonb_build_object('id', n.automation_id), 'step', jsonb_build_object('id', n.step_id),
                              'run', jsonb_build_object('id', n.run_id), 'reader', jsonb_build_object('id', r.reader_id)),
           r.reader_id, n.done_at
      FROM new_steps n
      JOIN wanted w ON w.tenant_id = n.tenant_id
      JOIN automation_runs r ON r.tenant_id = n.tenant_id AND r.id = n.run_id
     WHERE n.outcome = 'queued';
    RETURN NULL;
END $function$;

-- Row by row (a run ends once), since an UPDATE trigger with a column list cannot see
-- transition tables and the scheduler's batches update runs all the time.
CREATE OR REPLACE FUNCTION webhooks_on_automation_exit()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF webhook_wanted(NEW.tenant_id, 'automation.exited') THEN
        INSERT INTO outbound_events (tenant_id, type, data, reader_id, occurred_at)
        VALUES (NEW.tenant_id, 'automation.exited',
                jsonb_strip_nulls(jsonb_build_object(
                    'automation', jsonb_build_object('id', NEW.automation_id), 'run', jsonb_build_object('id', NEW.id),
                    'reader', jsonb_build_object('id', NEW.reader_id), 'state', NEW.state, 'reason', NEW.exit_reason)),
                NEW.reader_id, coalesce(NEW.ended_at, now()));
    END IF;
    RETURN NULL;
END $function$;

-- The workers' claim, across workspaces: up to `p_per_endpoint` due deliveries of each enabled
-- endpoint not in `p_busy` (this process already has that many in flight there), endpoints in
-- random order so no workspace's backlog goes first every time, at most `p_limit` in all. A
-- claim counts the attempt and moves the delivery a lease ahead: a worker that dies mid-attempt
-- leaves it due again when the lease runs out.
CREATE OR REPLACE FUNCTION webhook_claim(p_per_endpoint integer, p_limit integer, p_lease_seconds double precision, p_busy uuid[])
 RETURNS TABLE(tenant_id uuid, endpoint_id uuid, event_id uuid, attempts integer, url text, secret text,
               previous_secret text, type text, data jsonb, occurred_at timestamp with time zone,
               first_attempt_at timestamp with time zone)
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    WITH picked AS (
        SELECT d.tenant_id, d.endpoint_id, d.event_id
          FROM (SELECT e.tenant_id, e.id FROM webhook_endpoints e
                 WHERE e.enabled AND NOT (e.id = ANY (p_busy))
                   AND EXISTS (SELECT 1 FROM outbound_deliveries w
                                WHERE w.tenant_id = e.tenant_id AND w.endpoint_id = e.id
                                  AND w.state = 'pending' AND w.next_attempt_at <= now())
                 ORDER BY random()) e
          CROSS JOIN LATERAL (
              SELECT w.tenant_id, w.endpoint_id, w.event_id FROM outbound_deliveries w
               WHERE w.tenant_id = e.tenant_id AND w.endpoint_id = e.id
                 AND w.state = 'pending' AND w.next_attempt_at <= now()
               ORDER BY w.next_attempt_at
               LIMIT p_per_endpoint
               FOR UPDATE SKIP LOCKED) d
         LIMIT p_limit
    ), claimed AS (
        UPDATE outbound_deliveries w
           SET attempts = w.attempts + 1,
               next_attempt_at = now() + make_interval(secs => p_lease_seconds),
               last_attempt_at = now()
          FROM picked p
         WHERE w.tenant_id = p.tenant_id AND w.endpoint_id = p.endpoint_id AND w.event_id = p.event_id
        RETURNING w.tenant_id, w.endpoint_id, w.event_id, w.attempts, w.created_at
    )
    SELECT c.tenant_id, c.endpoint_id, c.event_id, c.attempts, e.url, e.secret,
           CASE WHEN e.previous_secret_until > now() THEN e.previous_secret END,
           ev.type, ev.data, ev.occurred_at, c.created_at
      FROM claimed c
      JOIN webhook_endpoints e ON e.tenant_id = c.tenant_id AND e.id = c.endpoint_id
      JOIN outbound_events ev ON ev.tenant_id = c.tenant_id AND ev.id = c.event_id
$function$;
REVOKE ALL ON FUNCTION webhook_claim(integer,integer,double precision,uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_claim(integer,integer,double precision,uuid[]) TO herald_app;

-- Delivered events older than the retention, and failed ones, are pruned (a workspace's
-- deliveries go with their event). Returns how many events went.
CREATE OR REPLACE FUNCTION webhook_prune(p_keep_seconds double precision, p_limit integer)
 RETURNS integer
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    WITH old AS (
        SELECT ev.tenant_id, ev.id FROM outbound_events ev
         WHERE ev.occurred_at < now() - make_interval(secs => p_keep_seconds)
           AND NOT EXISTS (SELECT 1 FROM outbound_deliveries d
                            WHERE d.tenant_id = ev.tenant_id AND d.event_id = ev.id AND d.state = 'pending')
         LIMIT p_limit
    ), gone AS (
        DELETE FROM outbound_events ev USING old WHERE ev.tenant_id = old.tenant_id AND ev.id = old.id RETURNING 1
    )
    SELECT count(*)::integer FROM gone
$function$;
REVOKE ALL ON FUNCTION webhook_prune(double precision,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_prune(double precision,integer) TO herald_app;

CREATE OR REPLACE TRIGGER outbound_events_fan_out AFTER INSERT ON outbound_events REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION outbound_events_fan_out();

CREATE OR REPLACE TRIGGER subscriptions_webhooks_new AFTER INSERT ON subscriptions REFERENCING NEW TABLE AS new_subscriptions FOR EACH STATEMENT EXECUTE FUNCTION webhooks_on_new_subscriptions();

CREATE OR REPLACE TRIGGER subscriptions_webhooks_changed AFTER UPDATE ON subscriptions REFERENCING OLD TABLE AS old_subscriptions NEW TABLE AS new_subscriptions FOR EACH STATEMENT EXECUTE FUNCTION webhooks_on_subscription_changes();

CREATE OR REPLACE TRIGGER readers_webhooks_changed AFTER UPDATE ON readers REFERENCING OLD TABLE AS old_readers NEW TABLE AS new_readers FOR EACH STATEMENT EXECUTE FUNCTION webhooks_on_reader_changes();

CREATE OR REPLACE TRIGGER readers_webhooks_deleted AFTER DELETE ON readers REFERENCING OLD TABLE AS old_readers FOR EACH STATEMENT EXECUTE FUNCTION webhooks_on_reader_deletes();

CREATE OR REPLACE TRIGGER reader_tags_webhooks_new AFTER INSERT ON reader_tags REFERENCING NEW TABLE AS new_tags FOR EACH STATEMENT EXECUTE FUNCTION webhooks_on_new_tags();

CREATE OR REPLACE TRIGGER reader_tags_webhooks_removed AFTER DELETE ON reader_tags REFERENCING OLD TABLE AS old_tags FOR EACH STATEMENT EXECUTE FUNCTION webhooks_on_removed_tags();

CREATE OR REPLACE TRIGGER events_webhooks AFTER INSERT ON events REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION webhooks_on_campaign_mail_events();

CREATE OR REPLACE TRIGGER message_events_webhooks AFTER INSERT ON message_events REFERENCING NEW TABLE AS new_message_events FOR EACH STATEMENT EXECUTE FUNCTION webhooks_on_transactional_events();

CREATE OR REPLACE TRIGGER automation_runs_webhooks_entered AFTER INSERT ON automation_runs REFERENCING NEW TABLE AS new_runs FOR EACH STATEMENT EXECUTE FUNCTION webhooks_on_automation_entries();

CREATE OR REPLACE TRIGGER automation_runs_webhooks_ended AFTER UPDATE OF state ON automation_runs FOR EACH ROW WHEN (((old.state = 'waiting'::text) AND (new.state <> 'waiting'::text))) EXECUTE FUNCTION webhooks_on_automation_exit();

CREATE OR REPLACE TRIGGER automation_step_log_webhooks AFTER INSERT ON automation_step_log REFERENCING NEW TABLE AS new_steps FOR EACH STATEMENT EXECUTE FUNCTION webhooks_on_automation_steps();

CREATE OR REPLACE TRIGGER campaigns_webhooks_status AFTER UPDATE OF status ON campaigns FOR EACH ROW WHEN (old.status IS DISTINCT FROM new.status) EXECUTE FUNCTION webhooks_on_campaign_status();
