-- Planner statistics after bulk writes (engine/src/infra/db.rs, `Db::analyze_if_stale`).
--
-- The one current text of these functions and triggers: `herald migrate` applies this file
-- after the schema migrations when it has changed. Edit here, never in a migration (a
-- changed signature needs its DROP FUNCTION in a migration first). See docs/database.md.

-- Statistics after Herald's own bulk writes.
--
-- A million readers entering an automation in one statement, or a campaign's fan-out, leave
-- `automation_runs` or `sends` far larger than their statistics say (or with none: a table never
-- analysed). Without column statistics Postgres multiplies default selectivities and expects one
-- row from any partial index, so the scheduler's look-up of its batch's runs became a nested loop
-- over every waiting run once per run of the batch: 8 s a batch at 100k readers (116 msg/s),
-- 2,134 msg/s after one ANALYZE in the same run. Autovacuum analyses such a table only at its
-- next round (a minute later by default, never where it is off), so the paths that follow a bulk
-- write ask for statistics themselves, here.
--
-- Owned by the tables' owner, not by the system role like every other definer function
-- (`migrate::OWNER_DEFINER_FUNCTIONS`): before Postgres 17 only a table's owner may ANALYZE it.
-- It analyses one of three named tables and nothing else.
CREATE OR REPLACE FUNCTION analyze_if_stale(p_table text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
DECLARE
    rel regclass;
    c record;
BEGIN
    IF p_table IS NULL OR p_table NOT IN ('sends', 'automation_runs', 'automation_step_log') THEN
        RAISE EXCEPTION 'analyze_if_stale: % is not a table Herald analyses', p_table
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    rel := to_regclass('public.' || p_table);
    -- Another process analysing this table now makes its statistics good enough.
    IF NOT pg_try_advisory_xact_lock(hashtext('analyze_if_stale'), hashtext(p_table)) THEN
        RETURN false;
    END IF;
    SELECT cl.reltuples, cl.relpages,
           pg_relation_size(rel) / current_setting('block_size')::bigint AS pages,
           pg_stat_get_mod_since_analyze(rel) AS changed
    INTO c FROM pg_class cl WHERE cl.oid = rel;
    -- Never analysed; grown by a fifth and a megabyte since (the page count is exact at once;
    -- the change counter reaches the statistics only when the writer reports, up to seconds
    -- later); or a fifth of its rows changed (a step moving every run).
    IF c.reltuples < 0 OR c.pages > 1.2 * c.relpages + 128 OR c.changed > 0.2 * greatest(c.reltuples, 0) + 10000 THEN
        -- SKIP_LOCKED: a VACUUM, an index build or DDL on the table makes this a no-op rather
        -- than a wait (a plain ANALYZE is not cancelled for them as autovacuum is).
        EXECUTE format('ANALYZE (SKIP_LOCKED) public.%I', p_table);
        RETURN true;
    END IF;
    RETURN false;
END $function$;
REVOKE ALL ON FUNCTION analyze_if_stale(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION analyze_if_stale(text) TO herald_app;
