-- The automation state machine: entry (triggers on subscriptions, tags, reader status and
-- suppressions), due times, the scheduler's batches and branches (engine/src/automations/).
--
-- The one current text of these functions and triggers: `herald migrate` applies this file
-- after the schema migrations when it has changed. Edit here, never in a migration (a
-- changed signature needs its DROP FUNCTION in a migration first). See docs/database.md.

-- The scheduler's batch, with the new steps and the warm-up limit.
CREATE OR REPLACE FUNCTION automation_advance(p_tenant uuid, p_automation uuid, p_now timestamp with time zone, p_limit integer)
 RETURNS TABLE(handled integer, queued integer)
 LANGUAGE plpgsql
AS $function$
DECLARE
    a record;
    step jsonb;
    yes bigint[];
    i int;
    n int;
    ids bigint[];
    -- Each run's step when the batch began: a run runs one step per batch, never the step it
    -- was just moved to (a wait must not end the moment it starts).
    starts uuid[];
    at_step bigint[];
    done bigint[];
    mail_campaigns uuid[];
    allowance bigint;
    v_handled int := 0;
    v_queued int := 0;
BEGIN
    -- A share lock: an edit (which takes the row for update) waits for this batch, and this
    -- batch for an edit, so a run is never moved by the old steps after the new were saved.
    SELECT * INTO a FROM automations WHERE tenant_id = p_tenant AND id = p_automation AND status = 'live' FOR SHARE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 0, 0;
        RETURN;
    END IF;
    SELECT array_agg(id), array_agg(step_id) INTO ids, starts FROM (
        SELECT id, step_id FROM automation_runs
        WHERE tenant_id = p_tenant AND automation_id = p_automation AND state = 'waiting' AND due_at <= p_now
        ORDER BY due_at LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ) due;
    IF ids IS NULL THEN
        RETURN QUERY SELECT 0, 0;
        RETURN;
    END IF;
    v_handled := cardinality(ids);

    -- Readers who may no longer be mailed leave (they unsubscribed, were suppressed or blocked).
    UPDATE automation_runs r SET state = 'exited', step_id = NULL, due_at = NULL, ended_at = p_now, exit_reason = x.why
    FROM (SELECT r2.id, automation_unmailable(p_tenant, r2.reader_id, p_automation) AS why
          FROM automation_runs r2 WHERE r2.tenant_id = p_tenant AND r2.id = ANY(ids)) x
    WHERE r.tenant_id = p_tenant AND r.id = x.id AND x.why IS NOT NULL;

    -- A run at a step the automation no longer has (an edit removed it while this run was
    -- locked by nobody yet; the edit moves runs itself, so this is a backstop) leaves.
    UPDATE automation_runs r SET state = 'exited', step_id = NULL, due_at = NULL, ended_at = p_now,
           exit_reason = 'its step was removed'
    WHERE r.tenant_id = p_tenant AND r.id = ANY(ids) AND r.state = 'waiting'
      AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(a.steps) s WHERE (s->>'id')::uuid = r.step_id);

    -- In order: a run whose last mail of this entry is still queued or being sent waits for it
    -- (a retry backing off, a slow server) before its next step, so a sequence's mails never
    -- overtake each other.
    SELECT array_agg((s->>'campaign_id')::uuid) INTO mail_campaigns
    FROM jsonb_array_elements(a.steps) s WHERE s->>'campaign_id' IS NOT NULL;
    IF mail_campaigns IS NOT NULL THEN
        UPDATE automation_runs r SET due_at = p_now + interval '10 seconds'
        WHERE r.tenant_id = p_tenant AND r.id = ANY(ids) AND r.state = 'waiting'
          AND EXISTS (SELECT 1 FROM sends s
                      WHERE s.reader_id = r.reader_id AND s.campaign_id = ANY(mail_campaigns) AND s.entry = r.entry
                        AND s.status IN ('queued', 'sending'));
    END IF;

    FOR i IN 0 .. jsonb_array_length(a.steps) - 1 LOOP
        step := a.steps->i;
        -- Driven from the batch (a primary-key probe per run): a join let the planner walk
        -- every run waiting at the step once per run of the batch (measured: 0.5 s a batch at
        -- 5,000 waiting, growing with them).
        SELECT array_agg(b.id) INTO at_step
        FROM unnest(ids, starts) AS b(id, start)
        WHERE b.start = (step->>'id')::uuid
          AND EXISTS (SELECT 1 FROM automation_runs r
                      WHERE r.tenant_id = p_tenant AND r.id = b.id AND r.state = 'waiting' AND r.step_id = b.start
                        AND r.due_at <= p_now);
        CONTINUE WHEN at_step IS NULL;

        -- Warm-up: a mail step queues no more than the workspace's daily allowance has left
        -- (campaigns and automations together); the rest keep their place and try again in
        -- 15 minutes, so a new workspace's automation cannot go past the limit either.
        IF step->'action'->>'kind' = 'email' THEN
            allowance := automation_mail_allowance(p_tenant);
            IF allowance IS NOT NULL AND allowance < cardinality(at_step) THEN
                UPDATE automation_runs SET due_at = p_now + interval '15 minutes'
                WHERE tenant_id = p_tenant AND id = ANY(at_step[greatest(allowance, 0) + 1 :]);
                at_step := at_step[1 : greatest(allowance, 0)];
                CONTINUE WHEN cardinality(at_step) = 0;
            END IF;
        END IF;

        -- The claim: runs whose log row this statement writes do the step; the others did it
        -- already (a batch that committed its log but not its move cannot exist: one
        -- transaction; this guards a run moved back by an edit).
        WITH logged AS (
            INSERT INTO automation_step_log (tenant_id, run_id, step_id, automation_id, done_at, outcome)
            SELECT p_tenant, id, (step->>'id')::uuid, p_automation, p_now,
                   CASE step->'action'->>'kind' WHEN 'email' THEN 'queued' WHEN 'wait' THEN 'waited'
                        WHEN 'wait_until' THEN 'waited' WHEN 'add_tag' THEN 'tagged' WHEN 'remove_tag' THEN 'untagged'
                        WHEN 'subscribe' THEN 'subscribed' WHEN 'unsubscribe' THEN 'unsubscribed'
                        WHEN 'branch' THEN 'no' ELSE 'exit' END
            FROM unnest(at_step) AS id
            ON CONFLICT DO NOTHING
            RETURNING run_id
        )
        SELECT array_agg(run_id) INTO done FROM logged;

        IF done IS NOT NULL THEN
            CASE step->'action'->>'kind'
            WHEN 'email' THEN
                INSERT INTO sends (tenant_id, campaign_id, reader_id, email, entry, feed)
                SELECT p_tenant, (step->>'campaign_id')::uuid, r.reader_id, rd.email, r.entry, r.data
                FROM automation_runs r JOIN readers rd ON rd.tenant_id = p_tenant AND rd.id = r.reader_id
                WHERE r.tenant_id = p_tenant AND r.id = ANY(done)
                ON CONFLICT DO NOTHING;
                GET DIAGNOSTICS n = ROW_COUNT;
                v_queued := v_queued + n;
                IF n > 0 THEN
                    INSERT INTO automation_mail_hours (tenant_id, hour, mails) VALUES (p_tenant, date_trunc('hour', now()), n)
                    ON CONFLICT (tenant_id, hour) DO UPDATE SET mails = automation_mail_hours.mails + EXCLUDED.mails;
                END IF;
            WHEN 'add_tag' THEN
                INSERT INTO reader_tags (tenant_id, tag_id, reader_id)
                SELECT p_tenant, (step->'action'->>'tag_id')::uuid, r.reader_id
                FROM automation_runs r
                WHERE r.tenant_id = p_tenant AND r.id = ANY(done)
                  AND EXISTS (SELECT 1 FROM tags t WHERE t.tenant_id = p_tenant AND t.id = (step->'action'->>'tag_id')::uuid)
                ON CONFLICT DO NOTHING;
            WHEN 'remove_tag' THEN
                DELETE FROM reader_tags t USING automation_runs r
                WHERE t.tenant_id = p_tenant AND t.tag_id = (step->'action'->>'tag_id')::uuid AND t.reader_id = r.reader_id
                  AND r.tenant_id = p_tenant AND r.id = ANY(done);
            WHEN 'subscribe' THEN
                -- A single opt-in list takes the reader at once. A double opt-in list takes only
                -- the reader's own click, as its form does: the step starts a pending
                -- subscription and owes the reader the list's confirmation mail. Mail cannot be
                -- sent from here, so the debt is a row of `confirmation_outbox`, written in this
                -- transaction and mailed by the scheduler after the commit
                -- (`audience::subscribe::send_owed_confirmations`): a crash in between cannot
                -- lose it. A subscription the reader has already (confirmed, pending or left) is
                -- kept as it is: one they left stays left, and nobody is asked twice.
                WITH target AS (
                    SELECT l.id, l.opt_in = 'double' AS double_opt_in FROM lists l
                    WHERE l.tenant_id = p_tenant AND l.id = (step->'action'->>'list_id')::uuid
                ), added AS (
                    INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at,
                                               confirmation_nonce, confirmation_sent_at)
                    SELECT p_tenant, t.id, r.reader_id,
                           CASE WHEN t.double_opt_in THEN 'unconfirmed' ELSE 'confirmed' END,
                           CASE WHEN t.double_opt_in THEN NULL ELSE now() END,
                           CASE WHEN t.double_opt_in THEN gen_random_uuid() END,
                           CASE WHEN t.double_opt_in THEN now() END
                    FROM automation_runs r CROSS JOIN target t
                    WHERE r.tenant_id = p_tenant AND r.id = ANY(done)
                    ON CONFLICT DO NOTHING
                    RETURNING reader_id, list_id, status
                ), owed AS (
                    INSERT INTO confirmation_outbox (tenant_id, reader_id, list_id)
                    SELECT p_tenant, reader_id, list_id FROM added WHERE status = 'unconfirmed'
                    ON CONFLICT DO NOTHING
                )
                -- The ledger says what the rest of Herald says: a request for a pending one
                -- (the reader's click adds its `confirm`), a subscription for a confirmed one.
                INSERT INTO consent_events (tenant_id, reader_id, list_id, action, source, wording)
                SELECT p_tenant, reader_id, list_id,
                       CASE WHEN status = 'unconfirmed' THEN 'subscribe_requested' ELSE 'subscribe' END,
                       'automation', a.name
                FROM added;
            WHEN 'unsubscribe' THEN
                WITH left_list AS (
                    UPDATE subscriptions s SET status = 'unsubscribed', unsubscribed_at = now(), confirmation_nonce = NULL
                    FROM automation_runs r
                    WHERE s.tenant_id = p_tenant AND s.list_id = (step->'action'->>'list_id')::uuid
                      AND s.reader_id = r.reader_id AND s.status <> 'unsubscribed'
                      AND r.tenant_id = p_tenant AND r.id = ANY(done)
                    RETURNING s.reader_id, s.list_id
                )
                INSERT INTO consent_events (tenant_id, reader_id, list_id, action, source, wording)
                SELECT p_tenant, reader_id, list_id, 'unsubscribe', 'automation', a.name FROM left_list;
            ELSE
                NULL;
            END CASE;
        END IF;

        -- Every run at this step moves on (one whose step was already logged, too: it must not
        -- stay at a step it did): an exit ends it, a branch sends each run where its condition
        -- says, any other step leads to the next.
        IF step->'action'->>'kind' = 'exit' THEN
            PERFORM automation_move(p_tenant, at_step, a.steps, NULL, p_now);
        ELSIF step->'action'->>'kind' = 'branch' THEN
            yes := automation_branch_holds(p_tenant, at_step, a.steps, step->'action'->'condition');
            UPDATE automation_step_log SET outcome = 'yes'
            WHERE tenant_id = p_tenant AND run_id = ANY(yes) AND step_id = (step->>'id')::uuid;
            PERFORM automation_move(p_tenant, yes, a.steps, automation_branch_target(step->'action'->'if_yes', i), p_now);
            PERFORM automation_move(p_tenant, ARRAY(SELECT unnest(at_step) EXCEPT SELECT unnest(yes)), a.steps,
                                    automation_branch_target(step->'action'->'if_no', i), p_now);
        ELSE
            PERFORM automation_move(p_tenant, at_step, a.steps, i + 1, p_now);
        END IF;
    END LOOP;
    RETURN QUERY SELECT v_handled, v_queued;
END $function$;

-- 2. A branch on a field's value (ignoring case and surrounding spaces), beside the others.
CREATE OR REPLACE FUNCTION automation_branch_holds(p_tenant uuid, p_runs bigint[], p_steps jsonb, p_condition jsonb)
 RETURNS bigint[]
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
    out bigint[];
    definition jsonb;
    lo bigint;
    hi bigint;
BEGIN
    CASE p_condition->>'kind'
    WHEN 'opened', 'clicked' THEN
        SELECT array_agg(r.id) INTO out FROM automation_runs r
        WHERE r.tenant_id = p_tenant AND r.id = ANY(p_runs)
          AND EXISTS (SELECT 1 FROM events e
                      WHERE e.reader_id = r.reader_id AND e.at >= r.entered_at AND e.tenant_id = p_tenant
                        AND e.campaign_id = (p_steps->((p_condition->>'step')::int)->>'campaign_id')::uuid
                        AND CASE WHEN p_condition->>'kind' = 'opened' THEN e.kind = 'open' AND NOT e.prefetch
                                 ELSE e.kind = 'click' END);
    WHEN 'has_tag' THEN
        SELECT array_agg(r.id) INTO out FROM automation_runs r
        WHERE r.tenant_id = p_tenant AND r.id = ANY(p_runs)
          AND EXISTS (SELECT 1 FROM reader_tags t WHERE t.tenant_id = p_tenant AND t.reader_id = r.reader_id
                        AND t.tag_id = (p_condition->>'tag_id')::uuid);
    WHEN 'in_segment' THEN
        SELECT s.definition INTO definition FROM segments s
        WHERE s.tenant_id = p_tenant AND s.id = (p_condition->>'segment_id')::uuid;
        SELECT min(reader_id) - 1, max(reader_id) INTO lo, hi FROM automation_runs
        WHERE tenant_id = p_tenant AND id = ANY(p_runs);
        IF definition IS NOT NULL THEN
            SELECT array_agg(r.id) INTO out FROM automation_runs r
            WHERE r.tenant_id = p_tenant AND r.id = ANY(p_runs)
              AND r.reader_id IN (SELECT segment_readers(definition, lo, hi, NULL));
        END IF;
    WHEN 'field_is' THEN
        SELECT array_agg(r.id) INTO out
        FROM automation_runs r JOIN readers rd ON rd.tenant_id = p_tenant AND rd.id = r.reader_id
        WHERE r.tenant_id = p_tenant AND r.id = ANY(p_runs)
          AND lower(trim(rd.attributes->>(p_condition->>'field'))) = lower(trim(p_condition->>'value'));
    ELSE
        NULL;
    END CASE;
    RETURN coalesce(out, '{}');
END $function$;

-- A branch target's place: the next step, a given later one, or NULL (exit).
CREATE OR REPLACE FUNCTION automation_branch_target(p_target jsonb, p_at integer)
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE
AS $function$
    SELECT CASE p_target->>'kind' WHEN 'next' THEN p_at + 1 WHEN 'step' THEN (p_target->>'index')::int END
$function$;

-- One check of a periodic trigger (in the workspace's transaction); returns the readers let in.
-- A segment's first check after going live only notes who is in it: entering means matching
-- since. An anniversary lets in each reader whose date's month and day are today's (29 February
-- on the 28th in other years) and who entered no run of it today.
CREATE OR REPLACE FUNCTION automation_check_trigger(p_tenant uuid, p_automation uuid, p_now timestamp with time zone)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
    a record;
    definition jsonb;
    fresh bigint[];
    today date := (p_now AT TIME ZONE 'UTC')::date;
    mmdd int;
    entered bigint := 0;
BEGIN
    SELECT * INTO a FROM automations WHERE tenant_id = p_tenant AND id = p_automation AND status = 'live' FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    IF a.trigger_kind = 'segment_entered' THEN
        SELECT s.definition INTO definition FROM segments s WHERE s.tenant_id = p_tenant AND s.id::text = a.trigger_key;
        IF definition IS NOT NULL THEN
            WITH now_in AS MATERIALIZED (SELECT segment_readers(definition, NULL, NULL, NULL) AS reader_id),
            gone AS (
                DELETE FROM automation_segment_members m
                WHERE m.tenant_id = p_tenant AND m.automation_id = p_automation
                  AND NOT EXISTS (SELECT 1 FROM now_in WHERE now_in.reader_id = m.reader_id)
            ),
            added AS (
                INSERT INTO automation_segment_members (tenant_id, automation_id, reader_id)
                SELECT p_tenant, p_automation, reader_id FROM now_in
                ON CONFLICT DO NOTHING
                RETURNING reader_id
            )
            SELECT array_agg(reader_id) INTO fresh FROM added;
            IF a.checked_at IS NOT NULL AND fresh IS NOT NULL THEN
                entered := automation_enter_into(p_automation, 'segment_entered',
                    array_fill(p_tenant, ARRAY[cardinality(fresh)]), array_fill(a.trigger_key, ARRAY[cardinality(fresh)]),
                    fresh, NULL);
            END IF;
        END IF;
    ELSIF a.trigger_kind = 'date_anniversary' THEN
        mmdd := to_char(today, 'MMDD')::int;
        SELECT array_agg(fv.reader_id) INTO fresh FROM field_values fv
        WHERE fv.tenant_id = p_tenant AND fv.field_key = a.trigger_key AND jsonb_typeof(fv.value) = 'number'
          AND ((fv.value)::numeric % 10000 = mmdd
               OR (mmdd = 228 AND (fv.value)::numeric % 10000 = 229
                   AND extract(day FROM (date_trunc('year', today) + interval '1 month 28 days')) <> 29))
          AND NOT EXISTS (SELECT 1 FROM automation_runs r
                          WHERE r.tenant_id = p_tenant AND r.automation_id = p_automation AND r.reader_id = fv.reader_id
                            AND r.entered_at >= (today::timestamp AT TIME ZONE 'UTC'));
        IF fresh IS NOT NULL THEN
            entered := automation_enter_into(p_automation, 'date_anniversary',
                array_fill(p_tenant, ARRAY[cardinality(fresh)]), array_fill(a.trigger_key, ARRAY[cardinality(fresh)]),
                fresh, NULL);
        END IF;
    END IF;
    UPDATE automations SET checked_at = p_now WHERE tenant_id = p_tenant AND id = p_automation;
    RETURN entered;
END $function$;

-- Lets readers into the live automations whose trigger is (kind, key), one per (tenant, key,
-- reader) triple of the arrays, as each automation's re-entry rule allows. Called by the
-- triggers below (a list confirmation, a tag) and by the API (events). Runs as its caller: row
-- security keeps each write in the caller's workspace. Returns the runs made.
CREATE OR REPLACE FUNCTION automation_enter(p_kind text, p_tenants uuid[], p_keys text[], p_readers bigint[], p_data jsonb)
 RETURNS bigint
 LANGUAGE sql
AS $function$
    SELECT automation_enter_into(NULL, p_kind, p_tenants, p_keys, p_readers, p_data)
$function$;

-- `automation_enter`, for one automation only when `p_only` is given (a periodic check lets
-- readers into its own automation, not into another one on the same segment).
CREATE OR REPLACE FUNCTION automation_enter_into(p_only uuid, p_kind text, p_tenants uuid[], p_keys text[], p_readers bigint[], p_data jsonb)
 RETURNS bigint
 LANGUAGE sql
AS $function$
    WITH entered AS (
        INSERT INTO automation_runs (tenant_id, automation_id, reader_id, entry, step_id, due_at, data)
        SELECT a.tenant_id, a.id, n.reader_id, coalesce(p.last_entry, 0) + 1,
               (a.steps->0->>'id')::uuid,
               CASE WHEN a.steps->0->'action'->>'kind' = 'wait_until'
                    THEN automation_step_due(a.steps->0, now(), a.tenant_id, n.reader_id)
                    ELSE automation_step_due(a.steps->0, now()) END,
               p_data
        FROM (SELECT DISTINCT * FROM unnest(p_tenants, p_keys, p_readers) AS x(tenant_id, key, reader_id)) n
        JOIN automations a ON a.tenant_id = n.tenant_id AND a.status = 'live' AND a.trigger_kind = p_kind
                          AND a.trigger_key = n.key AND jsonb_array_length(a.steps) > 0
                          AND (p_only IS NULL OR a.id = p_only)
        LEFT JOIN LATERAL (
            SELECT max(r.entry) AS last_entry, bool_or(r.state = 'waiting') AS under_way
            FROM automation_runs r
            WHERE r.tenant_id = a.tenant_id AND r.automation_id = a.id AND r.reader_id = n.reader_id
        ) p ON true
        WHERE p.last_entry IS NULL
           OR a.reentry = 'every_time'
           OR (a.reentry = 'after_finish' AND NOT p.under_way)
        ON CONFLICT DO NOTHING
        RETURNING 1
    )
    SELECT count(*) FROM entered
$function$;

-- Ends the reader's waiting runs that may no longer mail them, at once (not when their next
-- step falls due): the automation's page stops counting them, and nothing more is queued.
CREATE OR REPLACE FUNCTION automation_exit_unmailable(p_tenant uuid, p_reader bigint)
 RETURNS void
 LANGUAGE sql
AS $function$
    UPDATE automation_runs r
    SET state = 'exited', step_id = NULL, due_at = NULL, ended_at = now(),
        exit_reason = automation_unmailable(r.tenant_id, r.reader_id, r.automation_id)
    WHERE r.tenant_id = p_tenant AND r.reader_id = p_reader AND r.state = 'waiting'
      AND automation_unmailable(r.tenant_id, r.reader_id, r.automation_id) IS NOT NULL
$function$;

-- What the workspace may still mail in the last 24 hours (NULL: no limit; 0 or below: reached).
CREATE OR REPLACE FUNCTION automation_mail_allowance(p_tenant uuid)
 RETURNS bigint
 LANGUAGE sql
 STABLE
AS $function$
    SELECT t.campaign_mail_per_day
           - (SELECT coalesce(sum(c.recipients), 0) FROM campaigns c
              WHERE c.tenant_id = p_tenant AND c.started_at > now() - interval '1 day')
           - (SELECT coalesce(sum(h.mails), 0) FROM automation_mail_hours h
              WHERE h.tenant_id = p_tenant AND h.hour > now() - interval '25 hours')
    FROM tenants t WHERE t.id = p_tenant
$function$;

-- Moves runs still waiting (a step of the batch may have ended some: leaving the trigger's list)
-- to the step at place `p_to`, due when that step says; past the end (or NULL: an exit) they
-- finish. Only a "wait until" asks about the reader.
CREATE OR REPLACE FUNCTION automation_move(p_tenant uuid, p_runs bigint[], p_steps jsonb, p_to integer, p_now timestamp with time zone)
 RETURNS void
 LANGUAGE sql
AS $function$
    UPDATE automation_runs
    SET state = CASE WHEN p_steps->p_to IS NULL THEN 'finished' ELSE 'waiting' END,
        step_id = (p_steps->p_to->>'id')::uuid,
        due_at = CASE WHEN p_steps->p_to IS NULL THEN NULL
                      WHEN p_steps->p_to->'action'->>'kind' = 'wait_until'
                          THEN automation_step_due(p_steps->p_to, p_now, tenant_id, reader_id)
                      ELSE automation_step_due(p_steps->p_to, p_now) END,
        ended_at = CASE WHEN p_steps->p_to IS NULL THEN p_now END
    WHERE tenant_id = p_tenant AND id = ANY(p_runs) AND state = 'waiting'
$function$;

-- 1. "Wait until": the next of some weekdays at a time of day, in the zone a reader's field
-- names or the step's own. The next such moment strictly after `p_base`.
CREATE OR REPLACE FUNCTION automation_next_local_time(p_action jsonb, p_base timestamp with time zone, p_zone text)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
    local timestamp := p_base AT TIME ZONE p_zone;
    at_time time := (p_action->>'time')::time;
    days jsonb := coalesce(p_action->'weekdays', '[]');
    candidate timestamp;
BEGIN
    FOR k IN 0 .. 7 LOOP
        candidate := (local::date + k) + at_time;
        -- `dy` without TM is always the English abbreviation, whatever lc_time says.
        IF candidate > local AND (jsonb_array_length(days) = 0 OR days ? to_char(candidate, 'dy')) THEN
            RETURN candidate AT TIME ZONE p_zone;
        END IF;
    END LOOP;
    RETURN p_base;
END $function$;

-- Every way a run leaves early (an unsubscribe's trigger, the scheduler, an edit, archiving)
-- keeps the step it left from, for the step's "reached" count.
CREATE OR REPLACE FUNCTION automation_runs_keep_left_step()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    NEW.left_step_id := OLD.step_id;
    RETURN NEW;
END $function$;

-- When a step falls due once a run reaches it: a wait's length after `base`, any other step at once.
CREATE OR REPLACE FUNCTION automation_step_due(step jsonb, base timestamp with time zone)
 RETURNS timestamp with time zone
 LANGUAGE sql
 IMMUTABLE
AS $function$
    SELECT CASE WHEN step->'action'->>'kind' = 'wait'
                THEN base + make_interval(mins => ((step->'action'->>'amount')::int *
                     CASE step->'action'->>'unit' WHEN 'days' THEN 1440 WHEN 'hours' THEN 60 ELSE 1 END))
                ELSE base END
$function$;

CREATE OR REPLACE FUNCTION automation_step_due(p_step jsonb, p_base timestamp with time zone, p_tenant uuid, p_reader bigint)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
    zone text;
BEGIN
    IF p_step->'action'->>'kind' IS DISTINCT FROM 'wait_until' THEN
        RETURN automation_step_due(p_step, p_base);
    END IF;
    IF coalesce(p_step->'action'->>'zone_field', '') <> '' THEN
        SELECT nullif(trim(r.attributes->>(p_step->'action'->>'zone_field')), '') INTO zone
        FROM readers r WHERE r.tenant_id = p_tenant AND r.id = p_reader;
    END IF;
    IF zone IS NOT NULL THEN
        BEGIN
            RETURN automation_next_local_time(p_step->'action', p_base, zone);
        EXCEPTION WHEN invalid_parameter_value THEN
            NULL;  -- not a zone Postgres knows: the step's or the workspace's, below
        END;
    END IF;
    zone := nullif(trim(coalesce(p_step->'action'->>'zone', '')), '');
    IF zone IS NULL THEN
        SELECT t.time_zone INTO zone FROM tenants t WHERE t.id = p_tenant;
    END IF;
    RETURN automation_next_local_time(p_step->'action', p_base, coalesce(zone, 'UTC'));
END $function$;

-- Why a reader may not be mailed by automation `p_automation` now, or NULL: not active,
-- suppressed, or confirmed on none of the workspace's lists (on the trigger's own list, for an
-- automation a list starts). The scheduler asks before every step; delivery asks this same
-- function again at each claim and before a late message (`not_eligible!` in delivery/claim.rs).
CREATE OR REPLACE FUNCTION automation_unmailable(p_tenant uuid, p_reader bigint, p_automation uuid)
 RETURNS text
 LANGUAGE sql
 STABLE
AS $function$
    SELECT CASE WHEN r.status <> 'active' THEN 'reader ' || r.status
                WHEN EXISTS (SELECT 1 FROM suppressions x WHERE x.tenant_id = p_tenant AND x.email_lower = lower(r.email))
                    THEN 'suppressed'
                WHEN NOT EXISTS (SELECT 1 FROM subscriptions x WHERE x.tenant_id = p_tenant AND x.reader_id = r.id
                                 AND x.status = 'confirmed'
                                 AND (a.trigger_kind <> 'list_confirmed' OR x.list_id::text = a.trigger_key))
                    THEN 'unsubscribed'
           END
    FROM readers r, automations a
    WHERE r.tenant_id = p_tenant AND r.id = p_reader AND a.tenant_id = p_tenant AND a.id = p_automation
$function$;

-- A new confirmed subscription (an import, the API, a single opt-in form) lets its reader into
-- the automations of that list. Statement-level: an import of a million rows asks once.
CREATE OR REPLACE FUNCTION automations_on_new_subscriptions()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF EXISTS (SELECT 1 FROM automations WHERE status = 'live' AND trigger_kind = 'list_confirmed') THEN
        PERFORM automation_enter('list_confirmed', array_agg(n.tenant_id), array_agg(n.list_id::text),
                                 array_agg(n.reader_id), NULL)
        FROM new_subscriptions n WHERE n.status = 'confirmed';
    END IF;
    RETURN NULL;
END $function$;

-- A new tag on a reader lets them into that tag's automations (only a tag they did not have:
-- `ON CONFLICT DO NOTHING` leaves an existing one out of the transition table).
CREATE OR REPLACE FUNCTION automations_on_new_tags()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF EXISTS (SELECT 1 FROM automations WHERE status = 'live' AND trigger_kind = 'tag_added') THEN
        PERFORM automation_enter('tag_added', array_agg(n.tenant_id), array_agg(n.tag_id::text),
                                 array_agg(n.reader_id), NULL)
        FROM new_tags n;
    END IF;
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION automations_on_reader_status()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM automation_exit_unmailable(NEW.tenant_id, NEW.id);
    RETURN NULL;
END $function$;

-- A subscription that becomes confirmed (the confirmation link, a re-subscribe) does the same;
-- one that stops being confirmed takes its reader out of the runs that depended on it.
CREATE OR REPLACE FUNCTION automations_on_subscription_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NEW.status = 'confirmed' THEN
        PERFORM automation_enter('list_confirmed', ARRAY[NEW.tenant_id], ARRAY[NEW.list_id::text], ARRAY[NEW.reader_id], NULL);
    ELSE
        PERFORM automation_exit_unmailable(NEW.tenant_id, NEW.reader_id);
    END IF;
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION automations_on_suppression()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM automation_exit_unmailable(NEW.tenant_id, r.id)
    FROM readers r WHERE r.tenant_id = NEW.tenant_id AND lower(r.email) = NEW.email_lower;
    RETURN NULL;
END $function$;

-- The live automations whose periodic trigger is due a check at `p_now` (every 60 s).
CREATE OR REPLACE FUNCTION automations_to_check(p_now timestamp with time zone)
 RETURNS TABLE(tenant_id uuid, automation_id uuid)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    SELECT a.tenant_id, a.id FROM automations a
    WHERE a.status = 'live' AND a.trigger_kind IN ('segment_entered', 'date_anniversary')
      AND (a.checked_at IS NULL OR a.checked_at <= p_now - interval '60 seconds')
$function$;
REVOKE ALL ON FUNCTION automations_to_check(timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION automations_to_check(timestamp with time zone) TO herald_app;

-- The workspaces owed confirmation mails by a subscribe step (`confirmation_outbox`), across
-- workspaces: the scheduler mails them after every tick, and after a crash its next one does.
CREATE OR REPLACE FUNCTION confirmation_outbox_tenants()
 RETURNS TABLE(tenant_id uuid)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    SELECT DISTINCT o.tenant_id FROM confirmation_outbox o
$function$;
REVOKE ALL ON FUNCTION confirmation_outbox_tenants() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION confirmation_outbox_tenants() TO herald_app;

-- The live automations with a run due at `p_now`, across workspaces: one index probe each, so
-- the scheduler's cost does not grow with the readers waiting. The least recently served first
-- (`advanced_at`, then a fixed order): the scheduler gives each workspace a share of a tick, and
-- what a share left due goes first next time.
CREATE OR REPLACE FUNCTION due_automations(p_now timestamp with time zone)
 RETURNS TABLE(tenant_id uuid, automation_id uuid)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    SELECT a.tenant_id, a.id FROM automations a
    WHERE a.status = 'live'
      AND EXISTS (SELECT 1 FROM automation_runs r
                  WHERE r.tenant_id = a.tenant_id AND r.automation_id = a.id AND r.state = 'waiting' AND r.due_at <= p_now)
    ORDER BY a.advanced_at NULLS FIRST, a.tenant_id, a.id
$function$;
REVOKE ALL ON FUNCTION due_automations(timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION due_automations(timestamp with time zone) TO herald_app;

-- Triggers

CREATE OR REPLACE TRIGGER automation_runs_left_step BEFORE UPDATE OF state ON automation_runs FOR EACH ROW WHEN (((old.state = 'waiting'::text) AND (new.state = 'exited'::text))) EXECUTE FUNCTION automation_runs_keep_left_step();

CREATE OR REPLACE TRIGGER reader_tags_enter_automations AFTER INSERT ON reader_tags REFERENCING NEW TABLE AS new_tags FOR EACH STATEMENT EXECUTE FUNCTION automations_on_new_tags();

CREATE OR REPLACE TRIGGER readers_status_exits_automations AFTER UPDATE OF status ON readers FOR EACH ROW WHEN (((old.status = 'active'::text) AND (new.status <> 'active'::text))) EXECUTE FUNCTION automations_on_reader_status();

CREATE OR REPLACE TRIGGER subscriptions_change_automations AFTER UPDATE OF status ON subscriptions FOR EACH ROW WHEN (((old.status IS DISTINCT FROM new.status) AND ((old.status = 'confirmed'::text) OR (new.status = 'confirmed'::text)))) EXECUTE FUNCTION automations_on_subscription_change();

CREATE OR REPLACE TRIGGER subscriptions_enter_automations AFTER INSERT ON subscriptions REFERENCING NEW TABLE AS new_subscriptions FOR EACH STATEMENT EXECUTE FUNCTION automations_on_new_subscriptions();

CREATE OR REPLACE TRIGGER suppressions_exit_automations AFTER INSERT ON suppressions FOR EACH ROW EXECUTE FUNCTION automations_on_suppression();
