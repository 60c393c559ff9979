-- Issue 33, the rest: two more steps, a branch on a field, the warm-up limit for automation mail,
-- and a fifth of each sending identity kept for mail a reader is waiting for.

-- 1. "Wait until": the next of some weekdays at a time of day, in the zone a reader's field
-- names or the step's own. The next such moment strictly after `p_base`.
CREATE FUNCTION automation_next_local_time(p_action jsonb, p_base timestamptz, p_zone text) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
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
END $$;

-- When a step falls due once reader `p_reader`'s run reaches it at `p_base`. A reader whose zone
-- field is empty or names no zone Postgres knows waits in the step's zone.
CREATE FUNCTION automation_step_due(p_step jsonb, p_base timestamptz, p_tenant uuid, p_reader bigint)
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
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
            NULL;  -- not a zone Postgres knows: the step's own, below
        END;
    END IF;
    RETURN automation_next_local_time(p_step->'action', p_base, p_step->'action'->>'zone');
END $$;

-- Moves runs still waiting (a step of the batch may have ended some: leaving the trigger's list)
-- to the step at place `p_to`, due when that step says; past the end (or NULL: an exit) they
-- finish. Only a "wait until" asks about the reader.
CREATE OR REPLACE FUNCTION automation_move(p_tenant uuid, p_runs bigint[], p_steps jsonb, p_to int, p_now timestamptz)
RETURNS void LANGUAGE sql VOLATILE AS $$
    UPDATE automation_runs
    SET state = CASE WHEN p_steps->p_to IS NULL THEN 'finished' ELSE 'waiting' END,
        step_id = (p_steps->p_to->>'id')::uuid,
        due_at = CASE WHEN p_steps->p_to IS NULL THEN NULL
                      WHEN p_steps->p_to->'action'->>'kind' = 'wait_until'
                          THEN automation_step_due(p_steps->p_to, p_now, tenant_id, reader_id)
                      ELSE automation_step_due(p_steps->p_to, p_now) END,
        ended_at = CASE WHEN p_steps->p_to IS NULL THEN p_now END
    WHERE tenant_id = p_tenant AND id = ANY(p_runs) AND state = 'waiting'
$$;

CREATE OR REPLACE FUNCTION automation_enter_into(p_only uuid, p_kind text, p_tenants uuid[], p_keys text[],
                                                 p_readers bigint[], p_data jsonb)
RETURNS bigint LANGUAGE sql VOLATILE AS $$
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
$$;

-- 2. A branch on a field's value (ignoring case and surrounding spaces), beside the others.
CREATE OR REPLACE FUNCTION automation_branch_holds(p_tenant uuid, p_runs bigint[], p_steps jsonb, p_condition jsonb)
RETURNS bigint[] LANGUAGE plpgsql STABLE AS $$
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
END $$;

-- 3. Warm-up. Automation mail counts toward the workspace's daily limit beside its campaigns'
-- recipients: per hour, one row each batch adds to (counting send-log rows would scan them). The
-- hour that began 25 hours ago still counts whole, so the limit holds over any 24 hours.
CREATE TABLE automation_mail_hours (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    hour      timestamptz NOT NULL,
    mails     bigint NOT NULL,
    PRIMARY KEY (tenant_id, hour)
);
ALTER TABLE automation_mail_hours ENABLE ROW LEVEL SECURITY;
ALTER TABLE automation_mail_hours FORCE ROW LEVEL SECURITY;
CREATE POLICY automation_mail_hours_tenant ON automation_mail_hours FOR ALL
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());

-- What the workspace may still mail in the last 24 hours (NULL: no limit; 0 or below: reached).
CREATE FUNCTION automation_mail_allowance(p_tenant uuid) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT t.campaign_mail_per_day
           - (SELECT coalesce(sum(c.recipients), 0) FROM campaigns c
              WHERE c.tenant_id = p_tenant AND c.started_at > now() - interval '1 day')
           - (SELECT coalesce(sum(h.mails), 0) FROM automation_mail_hours h
              WHERE h.tenant_id = p_tenant AND h.hour > now() - interval '25 hours')
    FROM tenants t WHERE t.id = p_tenant
$$;

-- 4. A fifth of a sending identity for mail a reader waits for (automations, transactional):
-- while such mail has work (`until`, renewed as it sends), a campaign takes at most four fifths
-- of the identity's rate; keyed like `rate_buckets`, by the identity's bucket name. While an
-- automation's mail waits for a connection (key `<bucket>#connections`), a campaign gives up
-- the connections above four fifths of the identity's limit.
CREATE TABLE priority_demand (
    identity_key text PRIMARY KEY,
    until        timestamptz NOT NULL
);

-- 5. The report's "reached" counts the runs that left early at each step: by index, not by
-- scanning every run of the automation once per step.
CREATE INDEX automation_runs_left_step_idx ON automation_runs (tenant_id, automation_id, left_step_id)
    WHERE state = 'exited';

-- The scheduler's batch, with the new steps and the warm-up limit.
CREATE OR REPLACE FUNCTION automation_advance(p_tenant uuid, p_automation uuid, p_now timestamptz, p_limit int)
RETURNS TABLE (handled int, queued int)
LANGUAGE plpgsql VOLATILE AS $$
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
                WITH added AS (
                    INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at)
                    SELECT p_tenant, (step->'action'->>'list_id')::uuid, r.reader_id, 'confirmed', now()
                    FROM automation_runs r
                    WHERE r.tenant_id = p_tenant AND r.id = ANY(done)
                      AND EXISTS (SELECT 1 FROM lists l WHERE l.tenant_id = p_tenant AND l.id = (step->'action'->>'list_id')::uuid)
                    ON CONFLICT DO NOTHING
                    RETURNING reader_id, list_id
                )
                INSERT INTO consent_events (tenant_id, reader_id, list_id, action, source, wording)
                SELECT p_tenant, reader_id, list_id, 'subscribe', 'automation', a.name FROM added;
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
END $$;
