-- The scheduler's batch picked the runs at each step with a join that, with the runs' statistics
-- behind a big entry, became a nested loop over every run waiting at that step for each run of
-- the batch (`bench automations`: 1.25 s a batch at 200k readers, 0.22× the campaign's rate).
-- The same function, with that lookup driven from the batch.

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
