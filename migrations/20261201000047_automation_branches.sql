-- Branches (issue 33): a step that sends each reader on by a condition — opened or clicked an
-- earlier mail of the run, has a tag, is in a segment — to the next step, a later one (the
-- branches rejoin there) or out. Targets are places in the step list, forward only (checked on
-- save), so every run still ends.

-- Moves runs to the step at place `p_to` of `p_steps`, due when that step says; past the end
-- (or NULL: an exit) the runs finish.
CREATE FUNCTION automation_move(p_tenant uuid, p_runs bigint[], p_steps jsonb, p_to int, p_now timestamptz)
RETURNS void LANGUAGE sql VOLATILE AS $$
    UPDATE automation_runs
    SET state = CASE WHEN p_steps->p_to IS NULL THEN 'finished' ELSE 'waiting' END,
        step_id = (p_steps->p_to->>'id')::uuid,
        due_at = CASE WHEN p_steps->p_to IS NULL THEN NULL ELSE automation_step_due(p_steps->p_to, p_now) END,
        ended_at = CASE WHEN p_steps->p_to IS NULL THEN p_now END
    WHERE tenant_id = p_tenant AND id = ANY(p_runs)
$$;

-- A branch target's place: the next step, a given later one, or NULL (exit).
CREATE FUNCTION automation_branch_target(p_target jsonb, p_at int) RETURNS int
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE p_target->>'kind' WHEN 'next' THEN p_at + 1 WHEN 'step' THEN (p_target->>'index')::int END
$$;

-- The runs of `p_runs` for which the branch condition holds now. Opens and clicks count from
-- the run's entry (a reader's earlier run through the same mail does not), without a privacy
-- proxy's opens; a segment is evaluated over the batch's readers only (its id range).
CREATE FUNCTION automation_branch_holds(p_tenant uuid, p_runs bigint[], p_steps jsonb, p_condition jsonb)
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
    ELSE
        NULL;
    END CASE;
    RETURN coalesce(out, '{}');
END $$;

-- Runs one batch of due runs of one automation (at most p_limit, oldest due first): each
-- reader's current step once — its step-log row is the claim, so a second worker, a retried
-- batch or a crashed one that rolled back can never run it twice — then moves the run to the
-- next step, due when that step says (a wait: its length after p_now). Runs of readers who may
-- no longer be mailed exit instead. `p_now` is the scheduler's clock (tests pass their own).
-- Returns the runs handled and whether any email was queued (the caller starts delivery).
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
        SELECT array_agg(r.id) INTO at_step
        FROM unnest(ids, starts) AS b(id, start) JOIN automation_runs r ON r.tenant_id = p_tenant AND r.id = b.id
        WHERE b.start = (step->>'id')::uuid AND r.state = 'waiting' AND r.step_id = b.start AND r.due_at <= p_now;
        CONTINUE WHEN at_step IS NULL;

        -- The claim: runs whose log row this statement writes do the step; the others did it
        -- already (a batch that committed its log but not its move cannot exist: one
        -- transaction; this guards a run moved back by an edit).
        WITH logged AS (
            INSERT INTO automation_step_log (tenant_id, run_id, step_id, automation_id, done_at, outcome)
            SELECT p_tenant, id, (step->>'id')::uuid, p_automation, p_now,
                   CASE step->'action'->>'kind' WHEN 'email' THEN 'queued' WHEN 'wait' THEN 'waited'
                        WHEN 'add_tag' THEN 'tagged' WHEN 'remove_tag' THEN 'untagged' WHEN 'branch' THEN 'no'
                        ELSE 'exit' END
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


-- Two more triggers, checked periodically by the scheduler rather than by a write: a reader
-- entering a segment (matching it now, not at the last check), and the anniversary of a date
-- field (birthdays, renewals: the field's month and day are today's, UTC).
ALTER TABLE automations DROP CONSTRAINT automations_trigger_kind_check;
ALTER TABLE automations ADD CONSTRAINT automations_trigger_kind_check
    CHECK (trigger_kind IN ('list_confirmed', 'tag_added', 'event', 'segment_entered', 'date_anniversary'));
-- When its trigger was last checked (periodic triggers only; NULL: never, since it went live).
ALTER TABLE automations ADD COLUMN checked_at timestamptz;

-- The readers a segment-triggered automation saw in its segment at the last check: the next
-- check lets in those who matched since, and forgets those who left (they may enter again).
CREATE TABLE automation_segment_members (
    tenant_id     uuid NOT NULL,
    automation_id uuid NOT NULL,
    reader_id     bigint NOT NULL,
    PRIMARY KEY (tenant_id, automation_id, reader_id),
    FOREIGN KEY (tenant_id, automation_id) REFERENCES automations (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, reader_id) REFERENCES readers (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX automation_segment_members_reader_idx ON automation_segment_members (tenant_id, reader_id);
ALTER TABLE automation_segment_members ENABLE ROW LEVEL SECURITY;
ALTER TABLE automation_segment_members FORCE ROW LEVEL SECURITY;
CREATE POLICY automation_segment_members_tenant ON automation_segment_members FOR ALL
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY automation_segment_members_system ON automation_segment_members FOR ALL TO herald_system
    USING (true) WITH CHECK (true);

-- `automation_enter`, for one automation only when `p_only` is given (a periodic check lets
-- readers into its own automation, not into another one on the same segment).
CREATE FUNCTION automation_enter_into(p_only uuid, p_kind text, p_tenants uuid[], p_keys text[], p_readers bigint[],
                                      p_data jsonb)
RETURNS bigint LANGUAGE sql VOLATILE AS $$
    WITH entered AS (
        INSERT INTO automation_runs (tenant_id, automation_id, reader_id, entry, step_id, due_at, data)
        SELECT a.tenant_id, a.id, n.reader_id, coalesce(p.last_entry, 0) + 1,
               (a.steps->0->>'id')::uuid, automation_step_due(a.steps->0, now()), p_data
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

CREATE OR REPLACE FUNCTION automation_enter(p_kind text, p_tenants uuid[], p_keys text[], p_readers bigint[], p_data jsonb)
RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT automation_enter_into(NULL, p_kind, p_tenants, p_keys, p_readers, p_data)
$$;

-- The live automations whose periodic trigger is due a check at `p_now` (every 60 s).
CREATE FUNCTION automations_to_check(p_now timestamptz)
RETURNS TABLE (tenant_id uuid, automation_id uuid)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT a.tenant_id, a.id FROM automations a
    WHERE a.status = 'live' AND a.trigger_kind IN ('segment_entered', 'date_anniversary')
      AND (a.checked_at IS NULL OR a.checked_at <= p_now - interval '60 seconds')
$$;
REVOKE ALL ON FUNCTION automations_to_check(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION automations_to_check(timestamptz) TO herald_app;

-- One check of a periodic trigger (in the workspace's transaction); returns the readers let in.
-- A segment's first check after going live only notes who is in it: entering means matching
-- since. An anniversary lets in each reader whose date's month and day are today's (29 February
-- on the 28th in other years) and who entered no run of it today.
CREATE FUNCTION automation_check_trigger(p_tenant uuid, p_automation uuid, p_now timestamptz)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
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
END $$;
