-- Automations (issue 33): a trigger lets readers in; each reader's place is a row (a run) that
-- walks the automation's steps. Every step runs once per run (its row in automation_step_log is
-- the proof: the primary key refuses a second), and an email step is a send-log row of the
-- step's own campaign, keyed by the run's entry, so delivery — claim, fence, acknowledgement,
-- suppression, the frequency cap, tracking — is the campaigns' own.

CREATE TABLE automations (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           uuid NOT NULL,
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    status       text NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'live', 'paused', 'archived')),
    -- list_confirmed (key: the list's id), tag_added (the tag's id), event (its name).
    trigger_kind text NOT NULL CHECK (trigger_kind IN ('list_confirmed', 'tag_added', 'event')),
    trigger_key  text NOT NULL,
    reentry      text NOT NULL DEFAULT 'once' CHECK (reentry IN ('once', 'after_finish', 'every_time')),
    cap_exempt   boolean NOT NULL DEFAULT false,
    -- Why the engine paused it (a step's template broke, its mail kept failing).
    pause_reason text,
    -- [{"id": uuid, "action": {"kind": …}, "campaign_id": uuid|null}], in order. Email steps'
    -- content lives in their campaign rows (campaigns.automation_id).
    steps        jsonb NOT NULL DEFAULT '[]',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
-- The entry triggers look up the live automations a write can start.
CREATE INDEX automations_live_trigger_idx ON automations (tenant_id, trigger_kind, trigger_key) WHERE status = 'live';

-- An email step's campaign: never listed among campaigns, sending while its automation is live.
ALTER TABLE campaigns
    ADD COLUMN automation_id uuid,
    ADD COLUMN cap_exempt boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT campaigns_automation_fk FOREIGN KEY (tenant_id, automation_id)
        REFERENCES automations (tenant_id, id) ON DELETE CASCADE;
CREATE INDEX campaigns_automation_idx ON campaigns (tenant_id, automation_id) WHERE automation_id IS NOT NULL;

-- A reader who goes through an automation again is a new entry: its email steps are new rows
-- of the same campaign. Campaigns' own rows are entry 0, so their key is what it was.
ALTER TABLE sends ADD COLUMN entry int NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX sends_reader_campaign_entry_key ON sends (reader_id, campaign_id, entry);
ALTER TABLE sends DROP CONSTRAINT sends_reader_id_campaign_id_key;

CREATE TABLE automation_runs (
    tenant_id     uuid NOT NULL,
    id            bigint GENERATED ALWAYS AS IDENTITY,
    automation_id uuid NOT NULL,
    reader_id     bigint NOT NULL,
    entry         int NOT NULL CHECK (entry >= 1),
    state         text NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'finished', 'exited')),
    -- The step it waits to run, and when; both NULL once the run ended.
    step_id       uuid,
    due_at        timestamptz,
    -- The trigger's event data (`{{ event.* }}` in its mail).
    data          jsonb,
    entered_at    timestamptz NOT NULL DEFAULT now(),
    ended_at      timestamptz,
    exit_reason   text,
    -- The step a run that left early was waiting at (it reached that step, and did not do it).
    left_step_id  uuid,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, automation_id, reader_id, entry),
    FOREIGN KEY (tenant_id, automation_id) REFERENCES automations (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, reader_id) REFERENCES readers (tenant_id, id) ON DELETE CASCADE,
    CHECK ((state = 'waiting') = (step_id IS NOT NULL AND due_at IS NOT NULL))
);
-- The scheduler's one probe per live automation: the next due run, whatever number wait.
CREATE INDEX automation_runs_due_idx ON automation_runs (tenant_id, automation_id, due_at) WHERE state = 'waiting';
-- Counts and lists of the readers waiting at a step.
CREATE INDEX automation_runs_step_idx ON automation_runs (tenant_id, automation_id, step_id) WHERE state = 'waiting';
-- A reader's runs (their page, exits when they unsubscribe, erasure's cascade).
CREATE INDEX automation_runs_reader_idx ON automation_runs (tenant_id, reader_id);

-- Every way a run leaves early (an unsubscribe's trigger, the scheduler, an edit, archiving)
-- keeps the step it left from, for the step's "reached" count.
CREATE FUNCTION automation_runs_keep_left_step() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.left_step_id := OLD.step_id;
    RETURN NEW;
END $$;
CREATE TRIGGER automation_runs_left_step BEFORE UPDATE OF state ON automation_runs
    FOR EACH ROW WHEN (old.state = 'waiting' AND new.state = 'exited')
    EXECUTE FUNCTION automation_runs_keep_left_step();

CREATE TABLE automation_step_log (
    tenant_id     uuid NOT NULL,
    run_id        bigint NOT NULL,
    step_id       uuid NOT NULL,
    automation_id uuid NOT NULL,
    done_at       timestamptz NOT NULL DEFAULT now(),
    -- queued (an email's send-log row), waited, tagged, untagged, exit.
    outcome       text NOT NULL,
    PRIMARY KEY (tenant_id, run_id, step_id),
    FOREIGN KEY (tenant_id, run_id) REFERENCES automation_runs (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX automation_step_log_step_idx ON automation_step_log (tenant_id, automation_id, step_id);

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['automations', 'automation_runs', 'automation_step_log'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY %I ON %I FOR ALL USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id())', t || '_tenant', t);
        EXECUTE format('CREATE POLICY %I ON %I FOR ALL TO herald_system USING (true) WITH CHECK (true)', t || '_system', t);
    END LOOP;
END $$;

-- When a step falls due once a run reaches it: a wait's length after `base`, any other step at once.
CREATE FUNCTION automation_step_due(step jsonb, base timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN step->'action'->>'kind' = 'wait'
                THEN base + make_interval(mins => ((step->'action'->>'amount')::int *
                     CASE step->'action'->>'unit' WHEN 'days' THEN 1440 WHEN 'hours' THEN 60 ELSE 1 END))
                ELSE base END
$$;

-- Lets readers into the live automations whose trigger is (kind, key), one per (tenant, key,
-- reader) triple of the arrays, as each automation's re-entry rule allows. Called by the
-- triggers below (a list confirmation, a tag) and by the API (events). Runs as its caller: row
-- security keeps each write in the caller's workspace. Returns the runs made.
CREATE FUNCTION automation_enter(p_kind text, p_tenants uuid[], p_keys text[], p_readers bigint[], p_data jsonb)
RETURNS bigint LANGUAGE sql VOLATILE AS $$
    WITH entered AS (
        INSERT INTO automation_runs (tenant_id, automation_id, reader_id, entry, step_id, due_at, data)
        SELECT a.tenant_id, a.id, n.reader_id, coalesce(p.last_entry, 0) + 1,
               (a.steps->0->>'id')::uuid, automation_step_due(a.steps->0, now()), p_data
        FROM (SELECT DISTINCT * FROM unnest(p_tenants, p_keys, p_readers) AS x(tenant_id, key, reader_id)) n
        JOIN automations a ON a.tenant_id = n.tenant_id AND a.status = 'live' AND a.trigger_kind = p_kind
                          AND a.trigger_key = n.key AND jsonb_array_length(a.steps) > 0
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

-- A new confirmed subscription (an import, the API, a single opt-in form) lets its reader into
-- the automations of that list. Statement-level: an import of a million rows asks once.
CREATE FUNCTION automations_on_new_subscriptions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM automations WHERE status = 'live' AND trigger_kind = 'list_confirmed') THEN
        PERFORM automation_enter('list_confirmed', array_agg(n.tenant_id), array_agg(n.list_id::text),
                                 array_agg(n.reader_id), NULL)
        FROM new_subscriptions n WHERE n.status = 'confirmed';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER subscriptions_enter_automations AFTER INSERT ON subscriptions
    REFERENCING NEW TABLE AS new_subscriptions FOR EACH STATEMENT EXECUTE FUNCTION automations_on_new_subscriptions();

-- A subscription that becomes confirmed (the confirmation link, a re-subscribe) does the same;
-- one that stops being confirmed takes its reader out of the runs that depended on it.
CREATE FUNCTION automations_on_subscription_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'confirmed' THEN
        PERFORM automation_enter('list_confirmed', ARRAY[NEW.tenant_id], ARRAY[NEW.list_id::text], ARRAY[NEW.reader_id], NULL);
    ELSE
        PERFORM automation_exit_unmailable(NEW.tenant_id, NEW.reader_id);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER subscriptions_change_automations AFTER UPDATE OF status ON subscriptions
    FOR EACH ROW WHEN (old.status IS DISTINCT FROM new.status AND (old.status = 'confirmed' OR new.status = 'confirmed'))
    EXECUTE FUNCTION automations_on_subscription_change();

-- A new tag on a reader lets them into that tag's automations (only a tag they did not have:
-- `ON CONFLICT DO NOTHING` leaves an existing one out of the transition table).
CREATE FUNCTION automations_on_new_tags() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM automations WHERE status = 'live' AND trigger_kind = 'tag_added') THEN
        PERFORM automation_enter('tag_added', array_agg(n.tenant_id), array_agg(n.tag_id::text),
                                 array_agg(n.reader_id), NULL)
        FROM new_tags n;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER reader_tags_enter_automations AFTER INSERT ON reader_tags
    REFERENCING NEW TABLE AS new_tags FOR EACH STATEMENT EXECUTE FUNCTION automations_on_new_tags();

-- Why a reader may not be mailed by automation `p_automation` now, or NULL: not active,
-- suppressed, or confirmed on none of the workspace's lists (on the trigger's own list, for an
-- automation a list starts). The scheduler asks before every step; delivery asks again before
-- each message (`not_eligible!` in delivery.rs, the same conditions).
CREATE FUNCTION automation_unmailable(p_tenant uuid, p_reader bigint, p_automation uuid) RETURNS text
LANGUAGE sql STABLE AS $$
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
$$;

-- Ends the reader's waiting runs that may no longer mail them, at once (not when their next
-- step falls due): the automation's page stops counting them, and nothing more is queued.
CREATE FUNCTION automation_exit_unmailable(p_tenant uuid, p_reader bigint) RETURNS void
LANGUAGE sql VOLATILE AS $$
    UPDATE automation_runs r
    SET state = 'exited', step_id = NULL, due_at = NULL, ended_at = now(),
        exit_reason = automation_unmailable(r.tenant_id, r.reader_id, r.automation_id)
    WHERE r.tenant_id = p_tenant AND r.reader_id = p_reader AND r.state = 'waiting'
      AND automation_unmailable(r.tenant_id, r.reader_id, r.automation_id) IS NOT NULL
$$;

CREATE FUNCTION automations_on_reader_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM automation_exit_unmailable(NEW.tenant_id, NEW.id);
    RETURN NULL;
END $$;
CREATE TRIGGER readers_status_exits_automations AFTER UPDATE OF status ON readers
    FOR EACH ROW WHEN (old.status = 'active' AND new.status <> 'active')
    EXECUTE FUNCTION automations_on_reader_status();

CREATE FUNCTION automations_on_suppression() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM automation_exit_unmailable(NEW.tenant_id, r.id)
    FROM readers r WHERE r.tenant_id = NEW.tenant_id AND lower(r.email) = NEW.email_lower;
    RETURN NULL;
END $$;
CREATE TRIGGER suppressions_exit_automations AFTER INSERT ON suppressions
    FOR EACH ROW EXECUTE FUNCTION automations_on_suppression();

-- Runs one batch of due runs of one automation (at most p_limit, oldest due first): each
-- reader's current step once — its step-log row is the claim, so a second worker, a retried
-- batch or a crashed one that rolled back can never run it twice — then moves the run to the
-- next step, due when that step says (a wait: its length after p_now). Runs of readers who may
-- no longer be mailed exit instead. `p_now` is the scheduler's clock (tests pass their own).
-- Returns the runs handled and whether any email was queued (the caller starts delivery).
CREATE FUNCTION automation_advance(p_tenant uuid, p_automation uuid, p_now timestamptz, p_limit int)
RETURNS TABLE (handled int, queued int)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    a record;
    step jsonb;
    next_step jsonb;
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
        next_step := a.steps->(i + 1);
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
                        WHEN 'add_tag' THEN 'tagged' WHEN 'remove_tag' THEN 'untagged' ELSE 'exit' END
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
        -- stay at a step it did).
        IF step->'action'->>'kind' = 'exit' OR next_step IS NULL THEN
            UPDATE automation_runs SET state = 'finished', step_id = NULL, due_at = NULL, ended_at = p_now
            WHERE tenant_id = p_tenant AND id = ANY(at_step);
        ELSE
            UPDATE automation_runs SET step_id = (next_step->>'id')::uuid, due_at = automation_step_due(next_step, p_now)
            WHERE tenant_id = p_tenant AND id = ANY(at_step);
        END IF;
    END LOOP;
    RETURN QUERY SELECT v_handled, v_queued;
END $$;

-- The live automations with a run due at `p_now`, across workspaces: one index probe each, so
-- the scheduler's cost does not grow with the readers waiting.
CREATE FUNCTION due_automations(p_now timestamptz)
RETURNS TABLE (tenant_id uuid, automation_id uuid)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT a.tenant_id, a.id FROM automations a
    WHERE a.status = 'live'
      AND EXISTS (SELECT 1 FROM automation_runs r
                  WHERE r.tenant_id = a.tenant_id AND r.automation_id = a.id AND r.state = 'waiting' AND r.due_at <= p_now)
$$;
REVOKE ALL ON FUNCTION due_automations(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION due_automations(timestamptz) TO herald_app;

-- A live automation's step campaigns stay `sending` with nothing queued between readers: the
-- supervisor must not start delivery loops for them every 15 s to "finish" them (they never
-- finish), only when a row is due and no loop holds a slot.
DROP FUNCTION claim_unattended_campaigns(interval);
CREATE FUNCTION claim_unattended_campaigns(every interval)
RETURNS TABLE (tenant_id uuid, campaign_id uuid, fanout_done boolean)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
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
$$;
REVOKE ALL ON FUNCTION claim_unattended_campaigns(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION claim_unattended_campaigns(interval) TO herald_app;
